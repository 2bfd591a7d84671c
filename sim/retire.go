package sim

import "errors"

// Retire frees what an engine holds to serve requests (its KV cache and
// prefix index, request slots, array pools, queues) once it has none left,
// and keeps its result: an autoscaled fleet retires every instance it
// terminates, so that a day's hundreds of them cost their metrics, not
// their caches. Retire finishes the engine (its end-of-run invariants are
// checked then); Finish afterwards returns that same result, Status
// reports an idle, empty cache, and Inject is an error. It is an error to
// retire an engine with a request or an event left.
func (e *Engine) Retire() (err error) {
	if e.retired != nil {
		return nil
	}
	if !e.CanRetire() {
		return errors.New("sim: cannot retire an engine with requests or events left")
	}
	res, err := e.Finish()
	if err != nil {
		return err
	}
	e.retired = res
	kv := e.kv
	e.kv = &kvCache{blockSize: kv.blockSize, n: kv.n, numFree: kv.n, prefix: kv.prefix}
	e.reqs, e.free, e.running, e.byID = nil, nil, nil, nil
	e.int32s, e.uint64s = arrayPool[int32]{}, arrayPool[uint64]{}
	e.waiting = queue{keyed: e.waiting.keyed}
	e.batch, e.hit, e.rare, e.done = Batch{}, nil, nil, nil
	return nil
}

// Retired reports whether Retire was called.
func (e *Engine) Retired() bool { return e.retired != nil }

// CanRetire reports whether Retire would succeed: no events, no request
// left, and no KV kept for a decode instance to pull or being pulled.
func (e *Engine) CanRetire() bool {
	return e.retired != nil || (e.events.len() == 0 && e.pulling+e.kept == 0 &&
		e.injected == e.m.completed+e.m.dropped+e.m.timedOut+e.m.killed+e.m.redirected+e.m.handedOff)
}

// Empty is a retired engine that never served: a placeholder for an
// instance whose own engine its caller dropped (a fleet folds the
// instances it terminated). Its Status is idle with an empty cache of one
// block, it has no event, and Finish returns an empty result.
func Empty() *Engine {
	return &Engine{blockSize: 1, kv: &kvCache{blockSize: 1, n: 1, numFree: 1}, retired: &Result{}}
}
