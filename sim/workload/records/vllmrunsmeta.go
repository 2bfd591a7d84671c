package records

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/blis-sim/blis/internal/inputfile"
)

// RunMeta is what a vllm-runs meta.json (next to requests.jsonl) says about
// the deployment that served the run: vLLM's engine arguments, and for
// newer runs the KV cache vLLM allocated, the GPU and the resolved config.
// A field the file does not have is nil (0 for the counts).
type RunMeta struct {
	Path        string
	Model       string
	VLLMVersion string
	TP, DP      int
	// ExpertParallel is --enable-expert-parallel.
	ExpertParallel   bool
	MaxNumSeqs       int64
	MaxBatchedTokens int64
	MaxModelLen      int64 // 0: the model's own
	// KVBlocksGPU is the number of GPU KV blocks vLLM allocated (0: not
	// recorded), BlockSize its block size.
	KVBlocksGPU          int64
	BlockSize            int64
	GPUMemoryUtilization float64
	PrefixCaching        *bool
	ChunkedPrefill       *bool
	AsyncScheduling      *bool
	EnforceEager         *bool // model_config.enforce_eager (no CUDA graphs)
	ReserveFullISL       *bool // scheduler_reserve_full_isl
	// Device is the GPU's name as CUDA reports it ("" when not recorded).
	Device string
}

// MetaPath is the meta.json that belongs to a vllm-runs requests file.
func MetaPath(requestsPath string) string {
	return filepath.Join(filepath.Dir(requestsPath), "meta.json")
}

// ReadRunMeta reads a vllm-runs meta.json. Every field is optional except
// schema_version 1 and engine_kwargs.model; a field of the wrong type is an
// error naming it.
func ReadRunMeta(path string) (*RunMeta, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return ParseRunMeta(data, path)
}

// ParseRunMeta reads a meta.json's bytes; path names it in errors.
func ParseRunMeta(data []byte, path string) (*RunMeta, error) {
	var f struct {
		SchemaVersion *int   `json:"schema_version"`
		Model         string `json:"model"`
		VLLMVersion   string `json:"vllm_version"`
		EngineKwargs  *struct {
			Model          string `json:"model"`
			TP             *int   `json:"tensor_parallel_size"`
			DP             *int   `json:"data_parallel_size"`
			ExpertParallel *bool  `json:"enable_expert_parallel"`
			MaxNumSeqs     *int64 `json:"max_num_seqs"`
			MaxBatched     *int64 `json:"max_num_batched_tokens"`
			MaxModelLen    *int64 `json:"max_model_len"`
		} `json:"engine_kwargs"`
		KVCache *struct {
			NumGPUBlocks  *int64   `json:"num_gpu_blocks"`
			BlockSize     *int64   `json:"block_size"`
			GPUMemUtil    *float64 `json:"gpu_memory_utilization"`
			PrefixCaching *bool    `json:"enable_prefix_caching"`
		} `json:"kv_cache"`
		Hardware *struct {
			DeviceName string `json:"device_name"`
		} `json:"hardware"`
		Resolved *struct {
			Model *struct {
				EnforceEager *bool `json:"enforce_eager"`
			} `json:"model_config"`
			Scheduler *struct {
				AsyncScheduling *bool `json:"async_scheduling"`
				ChunkedPrefill  *bool `json:"enable_chunked_prefill"`
				ReserveFullISL  *bool `json:"scheduler_reserve_full_isl"`
			} `json:"scheduler_config"`
		} `json:"resolved_config"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&f); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			return nil, fmt.Errorf("%s: field %q: expected %s, got JSON %s", path, te.Field, te.Type, te.Value)
		}
		return nil, fmt.Errorf("%s: invalid JSON: %w", path, err)
	}
	if f.SchemaVersion == nil || *f.SchemaVersion != 1 {
		return nil, fmt.Errorf("%s: field \"schema_version\": must be 1", path)
	}
	m := &RunMeta{Path: path, Model: f.Model, VLLMVersion: f.VLLMVersion, TP: 1, DP: 1}
	if k := f.EngineKwargs; k != nil {
		if k.Model != "" {
			m.Model = k.Model
		}
		pos := func(field string, v *int, dst *int) error {
			if v != nil {
				if *v < 1 {
					return fmt.Errorf("%s: field %q: must be >= 1, got %d", path, field, *v)
				}
				*dst = *v
			}
			return nil
		}
		if err := pos("engine_kwargs.tensor_parallel_size", k.TP, &m.TP); err != nil {
			return nil, err
		}
		if err := pos("engine_kwargs.data_parallel_size", k.DP, &m.DP); err != nil {
			return nil, err
		}
		if k.ExpertParallel != nil {
			m.ExpertParallel = *k.ExpertParallel
		}
		for _, c := range []struct {
			field string
			v     *int64
			dst   *int64
		}{
			{"engine_kwargs.max_num_seqs", k.MaxNumSeqs, &m.MaxNumSeqs},
			{"engine_kwargs.max_num_batched_tokens", k.MaxBatched, &m.MaxBatchedTokens},
			{"engine_kwargs.max_model_len", k.MaxModelLen, &m.MaxModelLen},
		} {
			if c.v != nil {
				if *c.v < 1 {
					return nil, fmt.Errorf("%s: field %q: must be >= 1, got %d", path, c.field, *c.v)
				}
				*c.dst = *c.v
			}
		}
	}
	if m.Model == "" {
		return nil, fmt.Errorf("%s: field \"engine_kwargs.model\": missing", path)
	}
	if kv := f.KVCache; kv != nil {
		if kv.NumGPUBlocks != nil {
			if *kv.NumGPUBlocks < 1 {
				return nil, fmt.Errorf("%s: field \"kv_cache.num_gpu_blocks\": must be >= 1, got %d", path, *kv.NumGPUBlocks)
			}
			m.KVBlocksGPU = *kv.NumGPUBlocks
		}
		if kv.BlockSize != nil {
			if *kv.BlockSize < 1 {
				return nil, fmt.Errorf("%s: field \"kv_cache.block_size\": must be >= 1, got %d", path, *kv.BlockSize)
			}
			m.BlockSize = *kv.BlockSize
		}
		if kv.GPUMemUtil != nil {
			if !(*kv.GPUMemUtil > 0 && *kv.GPUMemUtil <= 1) {
				return nil, fmt.Errorf("%s: field \"kv_cache.gpu_memory_utilization\": must be in (0, 1], got %v", path, *kv.GPUMemUtil)
			}
			m.GPUMemoryUtilization = *kv.GPUMemUtil
		}
		m.PrefixCaching = kv.PrefixCaching
	}
	if h := f.Hardware; h != nil {
		m.Device = h.DeviceName
	}
	if r := f.Resolved; r != nil && r.Model != nil {
		m.EnforceEager = r.Model.EnforceEager
	}
	if r := f.Resolved; r != nil && r.Scheduler != nil {
		m.AsyncScheduling = r.Scheduler.AsyncScheduling
		m.ChunkedPrefill = r.Scheduler.ChunkedPrefill
		m.ReserveFullISL = r.Scheduler.ReserveFullISL
	}
	return m, nil
}
