// The limit's last minute: at most 60 samples, the oldest dropped first, read oldest first.
import t from 'tap'
import { HISTORY_LENGTH, LimitHistory } from '../../lib/live/history.js'

t.test('a minute of samples, oldest first, the oldest dropped past it', async (t) => {
  const history = new LimitHistory()
  t.same(history.samples(), [])
  for (let time = 1; time <= 3; time++) history.add({ time, limit: 10, inFlight: time })
  t.same(history.samples().map((s) => s.time), [1, 2, 3])
  for (let time = 4; time <= HISTORY_LENGTH + 5; time++) history.add({ time, limit: null, inFlight: 0 })
  const held = history.samples().map((s) => s.time)
  t.equal(held.length, HISTORY_LENGTH)
  t.same([held[0], held.at(-1)], [6, HISTORY_LENGTH + 5], 'the 60 latest, oldest first')
  t.same(held, [...held].sort((a, b) => a - b))
})
