// The live page's script, as the browser runs it: inline in the page (no external asset), allowed
// by its hash in the Content-Security-Policy. It polls `<page>/data` once a second and draws the
// numbers. Every text it shows — route names, reasons and keys come from requests — is set with
// `textContent` or as an attribute's value, never parsed as HTML.
export const PAGE_SCRIPT = String.raw`
'use strict'
;(function () {
  var dataUrl = location.pathname.replace(/\/+$/, '') + '/data' + location.search
  var previous = null
  var SVG = 'http://www.w3.org/2000/svg'

  function byId (id) { return document.getElementById(id) }
  function whole (n) { return Math.round(n).toLocaleString('en-US') }
  function perSecond (now, before, seconds) {
    if (before === undefined || seconds <= 0) return '\u2013'
    var r = Math.max(0, now - before) / seconds
    return r < 10 ? r.toFixed(1) : whole(r)
  }
  function row (cells, key, keyName) {
    var tr = document.createElement('tr')
    if (key !== undefined) tr.setAttribute(keyName, key)
    cells.forEach(function (value, i) {
      var td = document.createElement('td')
      td.textContent = value
      td.className = i === 0 ? 'name' : 'num'
      tr.appendChild(td)
    })
    return tr
  }
  function fill (id, rows, empty, columns) {
    var body = byId(id)
    body.replaceChildren()
    if (rows.length === 0) {
      var tr = document.createElement('tr')
      var td = document.createElement('td')
      td.textContent = empty
      td.colSpan = columns
      td.className = 'empty'
      tr.appendChild(td)
      body.appendChild(tr)
      return
    }
    rows.forEach(function (tr) { body.appendChild(tr) })
  }
  function line (points, max, className) {
    var n = 60
    var coords = []
    points.forEach(function (value, i) {
      if (value === null) return
      var x = (n - points.length + i) * 600 / (n - 1)
      var y = 130 - value / max * 120
      coords.push(x.toFixed(1) + ',' + y.toFixed(1))
    })
    var polyline = document.createElementNS(SVG, 'polyline')
    polyline.setAttribute('points', coords.join(' '))
    polyline.setAttribute('class', className)
    return polyline
  }
  function chart (history, limit) {
    var limits = history.map(function (s) { return s.limit })
    var inFlight = history.map(function (s) { return s.inFlight })
    var max = 1
    limits.concat(inFlight).forEach(function (v) { if (v !== null && v > max) max = v })
    max = Math.ceil(max * 1.1)
    var lines = byId('lines')
    lines.replaceChildren(line(limits, max, 'limit'), line(inFlight, max, 'in-flight'))
    byId('chart-max').textContent = whole(max)
    byId('legend-limit').textContent = limit === null ? 'no global limit' : 'limit'
  }
  function render (data) {
    var seconds = previous === null ? 0 : (data.time - previous.time) / 1000
    var before = previous === null ? {} : previous
    byId('in-flight').textContent = whole(data.inFlight)
    byId('limit').textContent = data.limit === null ? 'no limit' : whole(data.limit)
    byId('admitted-rate').textContent = perSecond(data.admitted, before.admitted, seconds)
    byId('limited-rate').textContent = perSecond(data.limited, before.limited, seconds)
    byId('shed-rate').textContent = perSecond(data.shed, before.shed, seconds)
    chart(data.history, data.limit)
    var routes = Object.keys(data.routes).sort().map(function (name) {
      var r = data.routes[name]
      var was = previous === null || previous.routes[name] === undefined ? {} : previous.routes[name]
      return row([name, perSecond(r.admitted, was.admitted, seconds), perSecond(r.limited, was.limited, seconds), perSecond(r.shed, was.shed, seconds),
        whole(r.inFlight), whole(r.admitted), whole(r.limited), whole(r.shed)], name, 'data-route')
    })
    fill('routes', routes, 'No gated route has been planned yet.', 8)
    var earlier = previous === null ? {} : previous.reasons
    var reasons = Object.keys(data.reasons).sort(function (a, b) { return data.reasons[b] - data.reasons[a] || (a < b ? -1 : 1) })
      .map(function (name) { return row([name, perSecond(data.reasons[name], earlier[name], seconds), whole(data.reasons[name])], name, 'data-reason') })
    fill('reasons', reasons, 'No route can refuse a request.', 3)
    if (data.offenders === null) {
      fill('offenders', [], 'Not kept (offenders: false).', 2)
    } else {
      fill('offenders', data.offenders.map(function (o) { return row([o.key, whole(o.refused)], o.key, 'data-key') }), 'No client refused in the last minute.', 2)
    }
    previous = data
  }
  function status (text, ok) {
    var el = byId('status')
    el.textContent = text
    el.className = ok ? 'ok' : 'down'
  }
  function poll () {
    fetch(dataUrl, { cache: 'no-store', credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (res) {
        if (!res.ok) throw new Error('the data answered ' + res.status)
        return res.json()
      })
      .then(function (data) {
        render(data)
        status('updated ' + new Date(data.time).toLocaleTimeString('en-GB'), true)
      })
      .catch(function (error) { status('no data: ' + error.message, false) })
      .then(function () { setTimeout(poll, 1000) })
  }
  poll()
})()
`
