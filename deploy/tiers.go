package deploy

import (
	"github.com/blis-sim/blis/cluster"
	"github.com/blis-sim/blis/internal/units"
	"github.com/blis-sim/blis/kvstore"
	"github.com/blis-sim/blis/sim"
)

// KV tiers beyond the GPU and CPU ones (docs/kv-tiers.md): a pool's local
// disk, and the deployment's shared store with each instance's link to it.
// Sizes are in GB (10⁹ bytes), rates in GB/s, latencies in µs.

// TierSpec is an instance's tiers beyond the CPU tier.
type TierSpec struct {
	// Disk is a local NVMe drive behind the CPU tier (nil: none).
	Disk *DiskSpec `json:"disk,omitempty"`
	// Store is the instance's link to the deployment's shared store (nil:
	// not linked). A deployment with a store sets it on every pool that
	// does not opt out (NoStore).
	Store   *StoreLinkSpec `json:"store_link,omitempty"`
	NoStore bool           `json:"-"`
	// wantStore: the pool's file asked for the link (kv_tiers.store: true).
	wantStore bool
}

// DiskSpec is a local disk.
type DiskSpec struct {
	CapacityGB  float64 `json:"capacity_gb"`
	ReadGBPerS  float64 `json:"read_gb_per_s"`
	WriteGBPerS float64 `json:"write_gb_per_s"`
	LatencyUs   int64   `json:"latency_us"`
}

// StoreLinkSpec is an instance's link to the store: per GPU of the
// instance (one NIC per GPU), and the latency of one get or put.
type StoreLinkSpec struct {
	GetGBPerSPerGPU float64 `json:"get_gb_per_s_per_gpu"`
	PutGBPerSPerGPU float64 `json:"put_gb_per_s_per_gpu"`
	LatencyUs       int64   `json:"latency_us"`
}

// KVStoreSpec is the deployment's shared store.
type KVStoreSpec struct {
	CapacityGB    float64       `json:"capacity_gb"`
	HighWatermark float64       `json:"high_watermark"`
	EvictionRatio float64       `json:"eviction_ratio"`
	SyncUs        int64         `json:"sync_us"`
	Link          StoreLinkSpec `json:"link"`
}

// DefaultDiskSpec is a PCIe 4.0 NVMe drive's rates and latency
// (sim.DefaultDisk*); its capacity must be given.
func DefaultDiskSpec() DiskSpec {
	return DiskSpec{ReadGBPerS: sim.DefaultDiskReadBytesPerS / 1e9, WriteGBPerS: sim.DefaultDiskWriteBytesPerS / 1e9, LatencyUs: sim.DefaultDiskLatencyUs}
}

// DefaultKVStoreSpec is the store's defaults (Mooncake's eviction, a
// 400 Gb/s NIC per GPU, 1 ms per get or put); its capacity must be given.
func DefaultKVStoreSpec() KVStoreSpec {
	r := sim.DefaultStoreBytesPerSPerGPU / 1e9
	return KVStoreSpec{HighWatermark: kvstore.DefaultHighWatermark, EvictionRatio: kvstore.DefaultEvictionRatio, SyncUs: cluster.DefaultKVStoreSyncUs,
		Link: StoreLinkSpec{GetGBPerSPerGPU: r, PutGBPerSPerGPU: r, LatencyUs: sim.DefaultStoreLatencyUs}}
}

// Cluster is the store as the cluster takes it.
func (s *KVStoreSpec) Cluster() *cluster.KVStore {
	return &cluster.KVStore{SyncUs: s.SyncUs, Store: kvstore.Config{CapacityBytes: units.GBToBytes(s.CapacityGB),
		HighWatermark: s.HighWatermark, EvictionRatio: s.EvictionRatio}}
}

// engineTiers is the instance's sim.KVTiers: blockBytes is one block's KV
// on the instance (all its GPUs), gpus its GPU count.
func (t *TierSpec) engineTiers(blockBytes float64, gpus int, cpuBlocks int64) (sim.KVTiers, error) {
	var kt sim.KVTiers
	if t.Disk == nil && t.Store == nil {
		return kt, nil
	}
	kt.BlockBytes = units.Ceil(blockBytes)
	if d := t.Disk; d != nil {
		// Each value is within its key's range (PoolKeys).
		if cpuBlocks <= 0 {
			return kt, fieldErrf("kv_tiers.disk", "sits behind the CPU tier (it takes the blocks the CPU tier evicts): give vllm.total_kv_blocks_cpu > 0")
		}
		blocks := units.Floor(d.CapacityGB * 1e9 / float64(kt.BlockBytes))
		if blocks < 1 {
			return kt, fieldErrf("kv_tiers.disk.capacity_gb", "%v GB holds no KV block of %d bytes", d.CapacityGB, kt.BlockBytes)
		}
		kt.Disk = sim.DiskTier{Blocks: blocks, ReadBytesPerS: d.ReadGBPerS * 1e9, WriteBytesPerS: d.WriteGBPerS * 1e9, LatencyUs: d.LatencyUs}
	}
	if l := t.Store; l != nil {
		g := float64(max(1, gpus))
		kt.Store = sim.StoreLink{GetBytesPerS: l.GetGBPerSPerGPU * 1e9 * g, PutBytesPerS: l.PutGBPerSPerGPU * 1e9 * g, LatencyUs: l.LatencyUs}
	}
	return kt, nil
}

// KVTiersYAML is a pool's kv_tiers keys:
//
//	kv_tiers:
//	  disk:                  # a local NVMe drive behind the CPU tier
//	    capacity_gb: 2000    # required
//	    read_gb_per_s: 7     # default 7 (PCIe 4.0 NVMe)
//	    write_gb_per_s: 5    # default 5
//	    latency_us: 80       # default 80
//	  store: true            # link to the deployment's kv_store (default: true when it has one)
type KVTiersYAML struct {
	Disk  *DiskYAML `yaml:"disk"`
	Store *bool     `yaml:"store"`
}

// DiskYAML is kv_tiers.disk.
type DiskYAML struct {
	CapacityGB  *float64 `yaml:"capacity_gb"`
	ReadGBPerS  *float64 `yaml:"read_gb_per_s"`
	WriteGBPerS *float64 `yaml:"write_gb_per_s"`
	LatencyUs   *int64   `yaml:"latency_us"`
}

// KVStoreYAML is a deployment's kv_store keys:
//
//	kv_store:
//	  capacity_gb: 1000      # required
//	  high_watermark: 0.95   # evict at this share of the capacity (Mooncake's default)
//	  eviction_ratio: 0.05   # share of the objects one eviction drops (Mooncake's default)
//	  get_gb_per_s: 23.75    # an instance's link per GPU (190 GB/s over 8 × 400 Gb/s NICs)
//	  put_gb_per_s: 23.75
//	  latency_us: 1000       # per get or put
//	  sync_us: 1000          # how often the instances' view of the store is updated
type KVStoreYAML struct {
	CapacityGB    *float64 `yaml:"capacity_gb"`
	HighWatermark *float64 `yaml:"high_watermark"`
	EvictionRatio *float64 `yaml:"eviction_ratio"`
	GetGBPerS     *float64 `yaml:"get_gb_per_s"`
	PutGBPerS     *float64 `yaml:"put_gb_per_s"`
	LatencyUs     *int64   `yaml:"latency_us"`
	SyncUs        *int64   `yaml:"sync_us"`
}

// Spec resolves y over the defaults.
func (y *KVStoreYAML) Spec() (*KVStoreSpec, error) {
	s := DefaultKVStoreSpec()
	if y.CapacityGB == nil {
		return nil, fieldErrf("kv_store.capacity_gb", "is required: the store's size in GB")
	}
	set(&s.CapacityGB, y.CapacityGB)
	set(&s.HighWatermark, y.HighWatermark)
	set(&s.EvictionRatio, y.EvictionRatio)
	set(&s.Link.GetGBPerSPerGPU, y.GetGBPerS)
	set(&s.Link.PutGBPerSPerGPU, y.PutGBPerS)
	set(&s.Link.LatencyUs, y.LatencyUs)
	set(&s.SyncUs, y.SyncUs)
	return &s, nil // each value within its key's range (KVStoreKeys)
}

// YAML is s as its keys, every key given.
func (s *KVStoreSpec) YAML() KVStoreYAML {
	return KVStoreYAML{CapacityGB: &s.CapacityGB, HighWatermark: &s.HighWatermark, EvictionRatio: &s.EvictionRatio,
		GetGBPerS: &s.Link.GetGBPerSPerGPU, PutGBPerS: &s.Link.PutGBPerSPerGPU, LatencyUs: &s.Link.LatencyUs, SyncUs: &s.SyncUs}
}

// apply sets the pool's kv_tiers on t.
func (y *KVTiersYAML) apply(t *TierSpec) error {
	if d := y.Disk; d != nil {
		ds := DefaultDiskSpec()
		if t.Disk != nil {
			ds = *t.Disk
		}
		if d.CapacityGB == nil && t.Disk == nil {
			return fieldErrf("kv_tiers.disk.capacity_gb", "is required with a disk: its size in GB")
		}
		set(&ds.CapacityGB, d.CapacityGB)
		set(&ds.ReadGBPerS, d.ReadGBPerS)
		set(&ds.WriteGBPerS, d.WriteGBPerS)
		set(&ds.LatencyUs, d.LatencyUs)
		t.Disk = &ds
	}
	if y.Store != nil {
		t.NoStore = !*y.Store
		t.wantStore = *y.Store
	}
	return nil
}

// yaml is t as its keys (nil when there is nothing to say).
func (t *TierSpec) yaml() *KVTiersYAML {
	if t.Disk == nil && t.Store == nil && !t.NoStore {
		return nil
	}
	y := &KVTiersYAML{}
	if d := t.Disk; d != nil {
		y.Disk = &DiskYAML{CapacityGB: &d.CapacityGB, ReadGBPerS: &d.ReadGBPerS, WriteGBPerS: &d.WriteGBPerS, LatencyUs: &d.LatencyUs}
	}
	if t.Store != nil || t.NoStore {
		y.Store = ptr(!t.NoStore)
	}
	return y
}

// LinkStore links every pool that does not opt out to the deployment's
// store (none: a pool that asked for a link is an error, under its
// kv_tiers.store).
func (d *Deployment) LinkStore() error {
	for i := range d.Pools {
		t := &d.Pools[i].Instance.Tiers
		switch {
		case d.KVStore == nil && t.wantStore:
			return &PoolError{Pool: i, Err: fieldErrf("kv_tiers.store", "links to the deployment's kv_store, and it has none")}
		case d.KVStore == nil || t.NoStore:
			t.Store = nil
		default:
			l := d.KVStore.Link
			t.Store = &l
		}
	}
	return nil
}
