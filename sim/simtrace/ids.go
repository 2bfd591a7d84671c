package simtrace

import (
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"

	imix "github.com/blis-sim/blis/internal/mix"
	"github.com/blis-sim/blis/internal/otlpspan"
)

// Identifiers are derived from the simulator's request id (or the step
// span's sequence number) through splitmix64's finalizer, a bijection of
// uint64: distinct inputs give distinct outputs, and only 0 maps to 0.
// Every salt has its top bit set, so that x^salt is never 0 for the
// non-negative ids the simulator uses.
//
// Step spans of a Writer with an InstanceID are further salted with a hash
// of it (instanceSalt: top bit clear, so that the salts' top bit stays set;
// never 0). The two halves of a salted trace id both carry the salt, so
// step span trace ids of two instances with different salts never collide;
// span ids of two instances collide with probability about 2^-63 per pair
// of spans.
//
// Every id of a Writer with an Options.RunID (request ids, trace and span
// ids of request and step spans) is salted with a hash of it (runSalt,
// made like instanceSalt and XORed into the instance salt), so that the
// traces of two runs (two configurations) can be ingested together: within
// a run the ids stay unique (the same bijections, one salt); across runs,
// request and step trace ids collide only when the two run salts agree on
// their low 56 bits (about 2^-56 per pair of runs), and span ids only when
// the salts differ by the XOR of two request ids or sequence numbers
// (about N²·2^-63 for runs of N requests).

var mix = imix.Splitmix64

const (
	saltRequestID = 0xa0761d6478bd642f
	saltSuffix    = 0xe7037ed1a0b428db
	saltTraceHi   = 0x8ebc6af09c88c6e3
	saltTraceLo   = 0x9b2b5d1a3ee1f0c5
	saltAPISpan   = 0xd6e8feb86659fd93
	saltCoreSpan  = 0xc2b2ae3d27d4eb4f
	saltStepSpan  = 0x9e3779b97f4a7c15
	saltInstance  = 0xb492b66fbe98f273
	saltRun       = 0xf1357aea2e62a9c5
)

// Trace id domains, stored in byte 8 of the trace id: request traces and
// step-span traces can never share an id, and no trace id is zero.
const (
	domainRequest byte = 1
	domainStep    byte = 2
)

// traceID is the trace id of n in a domain; salt is 0, or an instance's
// salt for step spans.
func traceID(domain byte, n int64, salt uint64) otlpspan.TraceID {
	var t otlpspan.TraceID
	hi := mix(uint64(n) ^ saltTraceHi ^ salt) // a bijection of n: unique per domain and salt
	binary.BigEndian.PutUint64(t[:8], hi)
	// Two salts give equal ids only with equal hi, so n^n' = salt^salt',
	// and equal bytes 9..15, so salts that differ at most in their top
	// byte: then n^n' >= 2^56, which sequence numbers never reach.
	binary.BigEndian.PutUint64(t[8:], mix(hi^saltTraceLo)^salt)
	t[8] = domain
	return t
}

// instanceSalt is 0 for no instance, else a hash of the id with the top
// bit clear and never 0.
func instanceSalt(id string) uint64 {
	if id == "" {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return mix(h.Sum64()^saltInstance)&^(1<<63) | 1
}

// runSalt is 0 for no run id, else a hash of it with the top bit clear and
// never 0.
func runSalt(id uint64) uint64 {
	if id == 0 {
		return 0
	}
	return mix(id^saltRun)&^(1<<63) | 1
}

func spanID(salt uint64, n int64) otlpspan.SpanID {
	var s otlpspan.SpanID
	binary.BigEndian.PutUint64(s[:], mix(uint64(n)^salt)) // never 0: n != salt
	return s
}

// requestIDs returns the API request id (prefix + 16 hex digits, unique per
// request and run salt) and the engine's id, which is the API id plus "-0-"
// and 4 hex digits, as vLLM's engine suffixes it. One allocation holds both.
func requestIDs(prefix string, n int64, run uint64) (api, engine string) {
	var b [64]byte
	out := append(b[:0], prefix...)
	out = hex.AppendEncode(out, binary.BigEndian.AppendUint64(nil, mix(uint64(n)^saltRequestID^run)))
	apiLen := len(out)
	out = append(out, "-0-"...)
	suffix := uint16(mix(uint64(n) ^ saltSuffix ^ run))
	out = hex.AppendEncode(out, []byte{byte(suffix >> 8), byte(suffix)})
	engine = string(out)
	return engine[:apiLen], engine
}
