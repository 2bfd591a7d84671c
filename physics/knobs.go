package physics

import (
	"fmt"
	"math"
)

// VLLMKnobs are the vLLM server settings that enter the physics features
// (docs/physics-spec.md). JSON keys are the golden fixture's.
type VLLMKnobs struct {
	MaxNumSeqs            int64   `json:"max_num_seqs"`            // --max-num-seqs
	MaxBatchedTokens      int64   `json:"max_batched_tokens"`      // --max-num-batched-tokens
	ChunkedPrefillEnabled bool    `json:"chunked_prefill_enabled"` // --enable-chunked-prefill
	CPUOffloading         bool    `json:"cpu_offloading"`          // KV offload to host memory
	BlockSizeTokens       int64   `json:"block_size_tokens"`       // --block-size
	TotalKVBlocksGPU      int64   `json:"total_kv_blocks_gpu"`     // 0: derive from memory
	TotalKVBlocksCPU      int64   `json:"total_kv_blocks_cpu"`     // required when CPUOffloading
	GPUMemoryUtilization  float64 `json:"gpu_memory_utilization"`  // --gpu-memory-utilization
	PrefixCachingEnabled  bool    `json:"prefix_caching_enabled"`  // --enable-prefix-caching
}

// DefaultVLLMKnobs are the tool's defaults when a user gives none: vLLM's
// V1 engine defaults for an API server (chunked prefill and prefix caching
// on, 16-token blocks, 90% memory), with 256 sequences and an 8192-token
// budget. Set them to the deployment's real values when you know them.
func DefaultVLLMKnobs() VLLMKnobs {
	return VLLMKnobs{
		MaxNumSeqs:            256,
		MaxBatchedTokens:      8192,
		ChunkedPrefillEnabled: true,
		BlockSizeTokens:       16,
		GPUMemoryUtilization:  0.9,
		PrefixCachingEnabled:  true,
	}
}

// Validate checks the knobs that every configuration needs.
func (k VLLMKnobs) Validate() error {
	const src = "vllm"
	if k.MaxNumSeqs <= 0 {
		return fieldErr(src, "max_num_seqs", "must be > 0, got %d", k.MaxNumSeqs)
	}
	if k.MaxBatchedTokens <= 0 {
		return fieldErr(src, "max_batched_tokens", "must be > 0, got %d (the deployment's effective token budget per step)", k.MaxBatchedTokens)
	}
	if k.BlockSizeTokens <= 0 || k.BlockSizeTokens > MaxBlockSizeTokens {
		return fieldErr(src, "block_size_tokens", "must be in [1, %d], got %d (vLLM's GPU block sizes are 1 to 128 tokens)", MaxBlockSizeTokens, k.BlockSizeTokens)
	}
	if k.TotalKVBlocksGPU < 0 {
		return fieldErr(src, "total_kv_blocks_gpu", "must be >= 0, got %d", k.TotalKVBlocksGPU)
	}
	if k.TotalKVBlocksCPU < 0 {
		return fieldErr(src, "total_kv_blocks_cpu", "must be >= 0, got %d", k.TotalKVBlocksCPU)
	}
	if k.CPUOffloading && k.TotalKVBlocksCPU == 0 {
		return fieldErr(src, "total_kv_blocks_cpu", "must be > 0 when cpu_offloading is on")
	}
	if !k.CPUOffloading && k.TotalKVBlocksCPU != 0 {
		return fieldErr(src, "total_kv_blocks_cpu", "is %d but cpu_offloading is off", k.TotalKVBlocksCPU)
	}
	if !(k.GPUMemoryUtilization > 0 && k.GPUMemoryUtilization <= 1) {
		return fieldErr(src, "gpu_memory_utilization", "must be in (0, 1], got %v", k.GPUMemoryUtilization)
	}
	return nil
}

// RuntimeOverheadBytes is the per-device memory vLLM cannot give to the KV
// cache beyond weights and activations: CUDA context, CUDA graphs, NCCL
// buffers. An estimate; give total_kv_blocks_gpu to override the derivation.
const RuntimeOverheadBytes = 1 << 30

// KVMemoryBudget is the per-device memory split behind a derived GPU KV
// block count, in bytes.
type KVMemoryBudget struct {
	Requested   float64 // memory_gib × 2^30 × gpu_memory_utilization
	Weights     float64 // resident parameter bytes / tp
	Activations float64 // peak activation estimate for one full batch
	Overhead    float64 // RuntimeOverheadBytes
	KV          float64 // what is left for the KV cache
	BlockBytes  float64 // one block's bytes on one device
	Blocks      int64   // floor(KV / BlockBytes)
}

// MaxBlockSizeTokens bounds block_size_tokens: vLLM's GPU attention
// backends take 1 to 128, some others 256 or more; beyond 1024 no backend
// pages KV.
const MaxBlockSizeTokens = 1024

// kvBudget derives the number of GPU KV blocks the way vLLM sizes its cache:
// the requested share of device memory minus weights, the activation peak of
// a profiling forward pass with a full token budget, and runtime overhead.
func kvBudget(m ModelSpec, h HardwareSpec, tp int, k VLLMKnobs, paramBytesResident, kvBytesPerToken float64) (KVMemoryBudget, error) {
	var b KVMemoryBudget
	if !(h.MemoryGiB > 0) {
		return b, fieldErr(h.Name, "memory_gib", "must be > 0 to derive total_kv_blocks_gpu (or give total_kv_blocks_gpu)")
	}
	tpf := float64(tp)
	b.Requested = h.MemoryGiB * (1 << 30) * k.GPUMemoryUtilization
	b.Weights = paramBytesResident / tpf
	activeMLP := float64(m.IntermediateSize)
	if m.IsMoE() {
		activeMLP = float64(m.TopK)*float64(m.IntermediateSize) + float64(m.SharedExpertIntermediateSize)
	}
	// Gate and up outputs of the MLP plus four hidden-wide buffers per token,
	// and fp32 logits for every sequence that samples.
	b.Activations = float64(k.MaxBatchedTokens)*(2*activeMLP/tpf+4*float64(m.HiddenSize))*m.BytesPerParam +
		float64(k.MaxNumSeqs)*float64(m.VocabSize)*4
	b.Overhead = RuntimeOverheadBytes
	b.KV = b.Requested - b.Weights - b.Activations - b.Overhead
	b.BlockBytes = float64(k.BlockSizeTokens) * kvBytesPerToken / tpf
	if b.KV <= 0 {
		return b, fmt.Errorf("model %q does not fit on %q at tp=%d: %.2f GiB requested per device, %.2f GiB weights, %.2f GiB activations, %.2f GiB overhead leave no KV cache",
			m.Name, h.Name, tp, b.Requested/(1<<30), b.Weights/(1<<30), b.Activations/(1<<30), b.Overhead/(1<<30))
	}
	if b.KV < b.BlockBytes {
		return b, fieldErr(h.Name, "block_size_tokens", "one block of %d tokens takes %.2f GiB per device, more than the %.2f GiB left for the KV cache", k.BlockSizeTokens, b.BlockBytes/(1<<30), b.KV/(1<<30))
	}
	b.Blocks = int64(math.Floor(b.KV / b.BlockBytes))
	return b, nil
}
