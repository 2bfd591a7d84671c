package route

// VLLMDPName is the policy of vLLM's own data-parallel load balancer.
const VLLMDPName = "vllm-dp"

// VLLMDP is the internal load balancer of a vLLM server started with
// --data-parallel-size N (vllm/v1/engine/core_client.py, DPLBAsyncMPClient):
// each request goes to the engine with the lowest score 4 × waiting +
// running, ties to the lowest index. The counts are the engines' own,
// published periodically by the DP coordinator (the View's queue depth and
// batch size, as fresh as the scrape interval makes them); between two
// publications the client adds each request it sends to the chosen
// engine's waiting count, so a burst does not all land on one engine.
type VLLMDP struct {
	// RefreshUs is the publication interval the counts follow (the
	// cluster's queue-depth refresh interval); 0 means the counts are read
	// fresh at every decision and the local additions never accumulate.
	RefreshUs int64
	sent      []int64 // requests sent to each engine since the last publication
	epoch     int64   // the publication the sent counts are relative to
}

// NewVLLMDP returns the policy for n engines whose counts are published
// every refreshUs.
func NewVLLMDP(n int, refreshUs int64) *VLLMDP {
	return &VLLMDP{RefreshUs: refreshUs, sent: make([]int64, n)}
}

func (p *VLLMDP) Name() string      { return VLLMDPName }
func (p *VLLMDP) NeedsHashes() bool { return false }

// sync drops the local additions once a newer publication is in the View.
func (p *VLLMDP) sync(v *View) {
	now := v.NowUs
	for len(p.sent) < v.Len() { // instances added by the autoscaler
		p.sent = append(p.sent, 0)
	}
	if p.RefreshUs <= 0 {
		clear(p.sent)
		return
	}
	if e := now / p.RefreshUs; e != p.epoch {
		p.epoch = e
		clear(p.sent)
	}
}

func (p *VLLMDP) score(v *View, i int) int64 {
	return 4*(v.QueueDepth[i]+p.sent[i]) + v.BatchSize[i]
}

// Score is −(4 × waiting + running), with the local additions.
func (p *VLLMDP) Score(_ *Request, v *View, dst []float64) {
	p.sync(v)
	for _, i := range v.Indexes() {
		dst[i] = float64(-p.score(v, int(i)))
	}
}

func (p *VLLMDP) Route(_ *Request, v *View) int {
	p.sync(v)
	best := v.first()
	for _, j := range v.Indexes() {
		if i := int(j); i > best && v.OK(i) && p.score(v, i) < p.score(v, best) {
			best = i
		}
	}
	return best
}

func (p *VLLMDP) Routed(_ *Request, i int) { p.sent[i]++ }
