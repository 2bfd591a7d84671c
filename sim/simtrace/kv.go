package simtrace

import (
	"io"
	"strconv"

	"github.com/blis-sim/blis/internal/tracevocab"
)

// kvLines writes the KV events subscriber's JSON lines, [ts, [event, ...]],
// one line per step that has events (otlpingest/kvevents.go reads them).
// ts is the step's end in wall-clock seconds: vLLM publishes a step's KV
// events after its output is processed.
//
// A store committed at step S transfers at step S+1, where the simulator
// also charges its cost: its TransferInitiated and TransferCompleted open
// the next step's line. A load is committed and transferred within its
// step.
//
// Lines are buffered, and handed to w only whole (a bufio.Writer would cut
// a line at its buffer's end), so that several Writers can share one
// output without mixing their lines.
type kvLines struct {
	w         io.Writer
	buf       []byte // the current line's events, comma-separated
	n         int    // events in buf
	newStores []int64
	nextID    int64 // transfer ids count up from 1
	lines     int64
	out       []byte // whole lines not yet written to w
}

// kvOutBytes is the size at which buffered lines are written.
const kvOutBytes = 64 << 10

func newKVLines(w io.Writer) *kvLines {
	return &kvLines{w: w, nextID: 1}
}

func (k *kvLines) open() {
	if k.n > 0 {
		k.buf = append(k.buf, ',')
	}
	k.n++
	k.buf = append(k.buf, '[')
}

func appendQuoted(b []byte, s string) []byte {
	// Every string here is ASCII without quotes or backslashes (media,
	// reasons, hex request ids).
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// transfer appends TransferInitiated and TransferCompleted of one transfer.
func (k *kvLines) transfer(req, src, dst string, blocks, step int64) {
	id := k.nextID
	k.nextID++
	for _, done := range [2]bool{false, true} {
		k.open()
		if done {
			k.buf = appendQuoted(k.buf, tracevocab.KVTransferCompleted)
		} else {
			k.buf = appendQuoted(k.buf, tracevocab.KVTransferInitiated)
		}
		k.buf = append(k.buf, ',')
		k.buf = strconv.AppendInt(k.buf, id, 10)
		k.buf = append(k.buf, ',')
		k.buf = appendQuoted(k.buf, req)
		k.buf = append(k.buf, ',')
		k.buf = appendQuoted(k.buf, src)
		k.buf = append(k.buf, ',')
		k.buf = appendQuoted(k.buf, dst)
		k.buf = append(k.buf, ',')
		k.buf = strconv.AppendInt(k.buf, blocks, 10)
		if done {
			k.buf = append(k.buf, ",true"...)
		}
		k.buf = append(k.buf, ',')
		k.buf = strconv.AppendInt(k.buf, step, 10)
		k.buf = append(k.buf, ']')
	}
}

// committed appends CacheStoreCommitted or CacheLoadCommitted.
func (k *kvLines) committed(typ, req, medium string, blocks, step int64) {
	k.open()
	k.buf = appendQuoted(k.buf, typ)
	k.buf = append(k.buf, ',')
	k.buf = appendQuoted(k.buf, req)
	k.buf = append(k.buf, ',')
	k.buf = appendQuoted(k.buf, medium)
	k.buf = append(k.buf, ',')
	k.buf = strconv.AppendInt(k.buf, blocks, 10)
	k.buf = append(k.buf, ',')
	k.buf = strconv.AppendInt(k.buf, step, 10)
	k.buf = append(k.buf, ']')
}

func (k *kvLines) store(blocks, step int64) {
	k.committed(tracevocab.KVCacheStoreCommitted, "", tracevocab.MediumCPU, blocks, step)
	k.newStores = append(k.newStores, blocks)
}

func (k *kvLines) load(req string, blocks, step int64) {
	k.committed(tracevocab.KVCacheLoadCommitted, req, tracevocab.MediumCPU, blocks, step)
	k.transfer(req, tracevocab.MediumCPU, tracevocab.MediumGPU, blocks, step)
}

func (k *kvLines) cpuEviction(blocks, step int64) {
	k.open()
	k.buf = appendQuoted(k.buf, tracevocab.KVCacheEviction)
	k.buf = append(k.buf, ',')
	k.buf = appendQuoted(k.buf, tracevocab.MediumCPU)
	k.buf = append(k.buf, ',')
	k.buf = strconv.AppendInt(k.buf, blocks, 10)
	k.buf = append(k.buf, ',')
	k.buf = appendQuoted(k.buf, tracevocab.EvictionLRU)
	k.buf = append(k.buf, ',')
	k.buf = strconv.AppendInt(k.buf, step, 10)
	k.buf = append(k.buf, ",null]"...)
}

// endStep writes the line of step id (if it has events) at wall-clock
// tsNs, then starts the next step's line with the transfers of this step's
// stores.
func (k *kvLines) endStep(id int64, tsNs int64) error {
	err := k.flush(tsNs)
	for _, b := range k.newStores {
		k.transfer("", tracevocab.MediumGPU, tracevocab.MediumCPU, b, id+1)
	}
	k.newStores = k.newStores[:0]
	return err
}

func (k *kvLines) flush(tsNs int64) error {
	if k.n == 0 {
		return nil
	}
	k.out = append(k.out, '[')
	k.out = strconv.AppendFloat(k.out, float64(tsNs)/1e9, 'f', -1, 64)
	k.out = append(k.out, ",["...)
	k.out = append(k.out, k.buf...)
	k.out = append(k.out, "]]\n"...)
	k.buf, k.n = k.buf[:0], 0
	k.lines++
	if len(k.out) >= kvOutBytes {
		return k.write()
	}
	return nil
}

// write hands the buffered lines to w.
func (k *kvLines) write() error {
	if len(k.out) == 0 {
		return nil
	}
	n, err := k.w.Write(k.out)
	if err == nil && n < len(k.out) {
		err = io.ErrShortWrite
	}
	k.out = k.out[:0]
	return err
}

// close writes what is left (the transfers of a store at the last step,
// which vLLM would run at the next one) and flushes.
func (k *kvLines) close(tsNs int64) error {
	err := k.flush(tsNs)
	if werr := k.write(); err == nil {
		err = werr
	}
	return err
}
