import { connect, type Socket } from 'node:net'

/** A raw client socket, for what a real client does on the wire (pipelining, cut bodies, HTTP/1.0). */
export function rawSocket (port: number): Promise<{ socket: Socket, received: () => string }> {
  return new Promise((resolve, reject) => {
    let data = ''
    const socket = connect(port, '127.0.0.1', () => { resolve({ socket, received: () => data }) })
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
  })
}

/** The status codes of the responses in `text`, in order. */
export function statuses (text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1]))
}
