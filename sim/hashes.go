package sim

import (
	"slices"

	"github.com/blis-sim/blis/internal/mix"
)

// Block identity. Block i of a request's token stream (its prompt, then
// its output) is, in this order of precedence:
//   - its prefix group's content, when it lies wholly inside the group's
//     shared prefix (PrefixGroup, PrefixTokens);
//   - named content, when it lies wholly inside the prompt's named chunks
//     (Content, ContentTokens: an imported trace's block hash ids);
//   - its session's content, when the request continues a session;
//   - the request's own content otherwise.
//
// The first three are shared content (another request can find them
// cached); own content only the request itself can look up again.
// A block's hash chains its content with the hash of the block before it,
// as vLLM's prefix cache does, so equal hashes mean equal prefixes and a
// cache lookup walks the chain from block 0.
//
// This is the one definition of block identity: the engine's prefix cache
// and the cluster's router-side prefix index both use it.

// chain combines a parent hash with a block's content.
func chain(h, v uint64) uint64 {
	return mix.Splitmix64(h ^ (v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)))
}

// blockShared says whether block i of spec's stream is shared content (it
// lies wholly inside the group's prefix). Any other block is the request's
// own, and since a block's hash chains every block before it, only the
// request itself can ever look that block up again. Shared blocks are a
// leading run: the engine tests i < SharedBlocks, which a test checks
// equals this definition.
func blockShared(spec *RequestSpec, i, blockSize int64) bool {
	return inGroupPrefix(spec, i, blockSize) || inContent(spec, i, blockSize) ||
		spec.Session > 0 && (i+1)*blockSize <= spec.PromptTokens+spec.OutputTokens
}

func inGroupPrefix(spec *RequestSpec, i, blockSize int64) bool {
	return spec.PrefixGroup > 0 && (i+1)*blockSize <= spec.PrefixTokens
}

// contentSpan is how many leading prompt tokens the named chunks cover.
func contentSpan(spec *RequestSpec) int64 {
	if len(spec.Content) == 0 {
		return 0
	}
	n := spec.PromptTokens / spec.ContentTokens
	return min(n, int64(len(spec.Content))) * spec.ContentTokens
}

func inContent(spec *RequestSpec, i, blockSize int64) bool {
	return len(spec.Content) > 0 && (i+1)*blockSize <= contentSpan(spec)
}

// SharedBlocks is how many leading blocks of spec's stream are shared
// content (its group's prefix), the only blocks another request can find
// cached: block i is shared exactly when i < SharedBlocks.
// A session request's whole stream is shared: the next turn re-sends it.
func SharedBlocks(spec *RequestSpec, blockSize int64) int64 {
	if spec.Session > 0 {
		return (spec.PromptTokens + spec.OutputTokens) / blockSize
	}
	var n int64
	if spec.PrefixGroup > 0 {
		n = spec.PrefixTokens / blockSize
	}
	return max(n, contentSpan(spec)/blockSize)
}

// blockContent identifies the tokens of block i of spec's stream.
// The kinds are tagged in the top bits so that no two kinds collide.
func blockContent(spec *RequestSpec, i, blockSize int64) uint64 {
	switch {
	case inGroupPrefix(spec, i, blockSize):
		return uint64(spec.PrefixGroup)<<32 | uint64(i) | 1<<63
	case inContent(spec, i, blockSize):
		// The chunks holding the block's first and last tokens, and the
		// block's position (chunks need not be a multiple of blocks).
		first, last := i*blockSize/spec.ContentTokens, ((i+1)*blockSize-1)/spec.ContentTokens
		return mix.Splitmix64(spec.Content[first]^mix.Splitmix64(spec.Content[last]+uint64(i))) | 3<<62
	case spec.Session > 0 && (i+1)*blockSize <= spec.PromptTokens+spec.OutputTokens:
		return mix.Splitmix64(uint64(spec.Session)<<24^uint64(i))&^(3<<62) | 1<<62
	}
	return (uint64(spec.ID)<<24 ^ uint64(i)) &^ (3 << 62)
}

// AppendBlockHashes extends dst, which must hold the chained hashes of
// spec's first len(dst) blocks (none at first), to its first n blocks of
// blockSize tokens, and returns it. It allocates only when dst must grow.
// A router hashes a request's prompt with n = PromptTokens / blockSize
// (the full blocks).
func AppendBlockHashes(dst []uint64, spec *RequestSpec, blockSize, n int64) []uint64 {
	i := int64(len(dst))
	if i >= n {
		return dst
	}
	dst = slices.Grow(dst, int(n-i))
	var parent uint64
	if i > 0 {
		parent = dst[i-1]
	}
	// The shared kinds cover leading blocks; every block past them is the
	// request's own, whose content needs no case analysis.
	for shared := min(n, SharedBlocks(spec, blockSize)); i < shared; i++ {
		parent = chain(parent, blockContent(spec, i, blockSize))
		dst = append(dst, parent)
	}
	own := uint64(spec.ID) << 24
	for ; i < n; i++ {
		parent = chain(parent, (own^uint64(i))&^(3<<62))
		dst = append(dst, parent)
	}
	return dst
}
