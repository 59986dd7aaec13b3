// N-6: a process task's output as bytes handed over as they are read
// (onData) and as Readable streams, its input as a Writable with 'drain'.
// Built on the library's consuming read (readProcess, P-RES-1) with output
// backpressure (P-OUT-4): while the host is attached nothing is dropped; a
// consumer that falls behind stops the reads, the library stops reading
// the task's pipes at its cap, and the task blocks on its writes, as a
// child writing into a full pipe does.
'use strict'
const { Readable, Writable } = require('node:stream')

// One per task spawned with onData (or streams: true).  index.js calls
// pull() from the task's onOutput, and once more, with atEnd, from the
// registry's own listener at the terminal transition (before any host
// listener or wait hears of the end), so the last bytes come out too.
class OutputPump {
  constructor(read, onData, chunk) {
    this.read = read // () => readChunks(id) of the task: [stdout, stderr] or undefined
    this.onData = onData // (chunk, stream, id) or undefined
    this.chunk = chunk // N-12: the most bytes handed over in one piece
    this.id = null
    this.out = null
    this.err = null
    this.paused = false
    this.ended = false
    this.scheduled = false
  }

  pull(atEnd) {
    if (this.ended || (this.paused && !atEnd)) return
    let r
    try {
      r = this.read()
    } catch (err) {
      // Forgotten or closed under us: nothing more will come.
      this.finish()
      return
    }
    try {
      if (r !== undefined) {
        if (r[0] !== null) this.deliver(r[0], 'stdout')
        if (r[1] !== null) this.deliver(r[1], 'stderr')
      }
    } finally {
      if (atEnd) this.finish()
    }
  }

  // N-12: a read holds at most `chunk` bytes per stream while the task
  // runs (the library's cap); the last read, after the leader exited, may
  // hold more (what the pipe still had): handed over in pieces.
  deliver(bytes, stream) {
    for (let at = 0; at < bytes.length; at += this.chunk) {
      this.deliverOne(at === 0 && bytes.length <= this.chunk ? bytes
        : bytes.subarray(at, at + this.chunk), stream)
    }
  }

  deliverOne(chunk, stream) {
    const s = stream === 'stdout' ? this.out : this.err
    // A stream consumer that is behind stops the reads until it asks again.
    if (s !== null && !s.push(chunk)) this.paused = true
    if (this.onData !== undefined) this.onData(chunk, stream, this.id)
  }

  finish() {
    if (this.ended) return
    this.ended = true
    if (this.out !== null) this.out.push(null)
    if (this.err !== null) this.err.push(null)
  }

  readable(stream) {
    const have = stream === 'stdout' ? this.out : this.err
    if (have !== null) return have
    const s = new Readable({ read: () => this.resume() })
    if (stream === 'stdout') this.out = s
    else this.err = s
    if (this.ended) s.push(null)
    return s
  }

  // A stream wants more: read now (not inside push(), which may call us).
  resume() {
    if (!this.paused || this.scheduled) return
    this.paused = false
    this.scheduled = true
    process.nextTick(() => {
      this.scheduled = false
      this.pull(false)
    })
  }
}

// The task's stdin as a Writable: each chunk goes to write() (P-IN-1); a
// write the task's stdinCapBytes refuses (ENOBUFS) is retried, in smaller
// pieces and after a short delay, until the task took it, so the stream's
// own buffering gives 'drain' as for any Writable.  end() is closeStdin()
// once everything written has been accepted.  The library says nothing
// when its input queue empties, so the retry is a timer (1 ms, doubling to
// 50 ms), not an event.
function stdinWritable(write, closeStdin) {
  let piece = 64 * 1024
  function writeFrom(chunk, off, cb, delay) {
    while (off < chunk.length) {
      const part = chunk.subarray(off, off + piece)
      try {
        write(part)
      } catch (err) {
        if (err.code !== 'ENOBUFS') {
          cb(err)
          return
        }
        piece = Math.max(1, part.length >> 1)
        setTimeout(writeFrom, delay, chunk, off, cb, Math.min(delay * 2, 50))
        return
      }
      off += part.length
      piece = Math.min(piece * 2, 64 * 1024)
    }
    cb()
  }
  return new Writable({
    highWaterMark: 64 * 1024,
    write(chunk, encoding, cb) {
      writeFrom(chunk, 0, cb, 1)
    },
    final(cb) {
      try {
        closeStdin()
        cb()
      } catch (err) {
        cb(err)
      }
    },
  })
}

module.exports = { OutputPump, stdinWritable }
