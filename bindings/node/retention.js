// N-11 (N-8 as it is since v4): what a registry keeps of ended tasks, for
// every host shape (one that reads, one that only waits, one that only
// listens, one that never hears of an end).  Every ended task counts,
// whether or not anyone read it or heard of its end:
//
//   unread   it holds output nobody has read (no read() or readProcess()
//            since its end, no onData): counts against maxUnreadBytes, its
//            bytes and at least RECORD_BYTES (what a record costs), so
//            small outputs cannot pile up without a bound either;
//   spent    nothing of it is left to read (read since its end, onData's,
//            or it had no output): counts against keepFinished, and its
//            bytes (a read does not free them) against maxUnreadBytes;
//   lingering its session still has processes (P-LEFT-1): never forgotten
//            here, looked at again (one per end) until they are gone.
//
// Past keepFinished the oldest spent task goes; past maxUnreadBytes the
// oldest spent task that holds bytes, else the oldest unread one (its
// output is then lost: metrics and the error of a later look say so).
// "Oldest": in the order they ended, or were read for the spent ones.
// A host's wait() reads nothing, so it makes nothing spent (F1).
//
// Each end costs O(1) whatever the number of records (F2): a few Map
// operations, one look at the record's size, at most one lingering task
// looked at, and the drops it causes (each record is dropped once).
'use strict'

const RECORD_BYTES = 4096
const FORGOTTEN_REMEMBERED = 1024

class Retention {
  // ops: { held(id, h) -> bytes, leftovers(id, h) -> n, forget(id, h),
  // dropped(id) } over the registry; each may throw (the record is gone).
  constructor(ops, keep, maxBytes) {
    this.ops = ops
    this.keep = keep
    this.maxBytes = maxBytes
    this.off = keep === Infinity && maxBytes === Infinity
    this.seq = 0
    this.light = new Map() // spent, holding no bytes
    this.heavy = new Map() // spent, holding bytes
    this.unread = new Map()
    this.lingering = new Map()
    this.bytes = 0 // what unread and spent tasks count against maxBytes
    this.forgottenIds = new Map() // id -> { bound, unreadBytes }, the latest
    this.counts = { forgotten: 0, forgottenUnread: 0, unreadBytesDropped: 0 }
  }

  // A task ended (the registry's first listener).  `consumed`: onData
  // read it; `lingering`: its session still had processes at the end.
  ended(id, h, lingering, consumed) {
    if (this.off) return
    const e = { id, h, bytes: 0, seq: 0, read: consumed, cost: 0, where: null }
    if (lingering) {
      e.where = this.lingering
      this.lingering.set(id, e)
      return
    }
    try {
      e.bytes = this.ops.held(id, h)
    } catch {
      return // dropped meanwhile (a forget from an earlier listener)
    }
    this.place(e)
  }

  place(e) {
    e.seq = ++this.seq
    if (e.read || e.bytes === 0) {
      e.where = e.bytes === 0 ? this.light : this.heavy
      e.cost = e.bytes
    } else {
      e.where = this.unread
      e.cost = Math.max(e.bytes, RECORD_BYTES)
    }
    e.where.set(e.id, e)
    this.bytes += e.cost
  }

  unplace(e) {
    e.where.delete(e.id)
    this.bytes -= e.cost
    e.cost = 0
    e.where = null
  }

  entry(id) {
    return this.unread.get(id) ?? this.heavy.get(id) ?? this.light.get(id) ??
      this.lingering.get(id)
  }

  // The host read the ended task (read(), readProcess()): nothing of it is
  // left to read.
  read(id) {
    const e = this.entry(id)
    if (e === undefined || e.read) return
    e.read = true
    if (e.where === this.unread) {
      this.unplace(e)
      this.place(e)
    }
  }

  // Gone otherwise (the host's forget(), a disposal): stop counting it.
  removed(id) {
    const e = this.entry(id)
    if (e === undefined) return
    if (e.where === this.lingering) this.lingering.delete(id)
    else this.unplace(e)
  }

  // An agent was disposed: its ended tasks went with it.
  agentGone(h) {
    for (const m of [this.light, this.heavy, this.unread, this.lingering]) {
      for (const e of [...m.values()]) if (e.h === h) this.removed(e.id)
    }
  }

  spent() {
    return this.light.size + this.heavy.size
  }

  over() {
    return this.spent() > this.keep || this.bytes > this.maxBytes
  }

  due() {
    return !this.off && (this.lingering.size > 0 || this.over())
  }

  // One lingering task looked at (the oldest; to the back if it still
  // has processes), then the drops the bounds ask for.
  sweep() {
    if (this.off) return
    this.lookAtLingering()
    while (this.over()) {
      let e
      let bound
      if (this.spent() > this.keep) {
        const a = first(this.light)
        const b = first(this.heavy)
        e = a === undefined || (b !== undefined && b.seq < a.seq) ? b : a
        bound = 'keepFinished'
      } else {
        e = first(this.heavy) ?? first(this.unread)
        bound = 'maxUnreadBytes'
      }
      if (e === undefined) return // only lingering tasks are left
      this.drop(e, bound)
    }
  }

  lookAtLingering() {
    const e = first(this.lingering)
    if (e === undefined) return
    this.lingering.delete(e.id)
    let n
    try {
      n = this.ops.leftovers(e.id, e.h)
    } catch {
      return // gone
    }
    if (n > 0) {
      this.lingering.set(e.id, e)
      return
    }
    try {
      e.bytes = this.ops.held(e.id, e.h)
    } catch {
      return
    }
    this.place(e)
  }

  drop(e, bound) {
    const unread = e.where === this.unread
    this.unplace(e)
    try {
      this.ops.forget(e.id, e.h)
    } catch {
      return // gone already: nothing was dropped here
    }
    this.counts.forgotten++
    if (unread) {
      this.counts.forgottenUnread++
      this.counts.unreadBytesDropped += e.bytes
    }
    this.forgottenIds.set(e.id, { bound, unreadBytes: unread ? e.bytes : 0 })
    if (this.forgottenIds.size > FORGOTTEN_REMEMBERED) {
      this.forgottenIds.delete(first(this.forgottenIds, true))
    }
    this.ops.dropped(e.id)
  }

  // Why `id` is unknown, if this bound forgot it lately.
  why(id) {
    return this.forgottenIds.get(id)
  }

  clear() {
    for (const m of [this.light, this.heavy, this.unread, this.lingering]) m.clear()
    this.bytes = 0
  }
}

// The oldest entry of a Map (its value; its key with `key`), or undefined.
function first(map, key = false) {
  for (const [k, v] of map) return key ? k : v
  return undefined
}

module.exports = { Retention, RECORD_BYTES }
