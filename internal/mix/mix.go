// Package mix has the 64-bit mixing function the simulator uses for block
// hashes and trace identifiers.
package mix

// Splitmix64 is splitmix64's finalizer: a bijection of uint64 (distinct
// inputs give distinct outputs; only 0 maps to 0) that spreads every input
// bit over the whole output.
func Splitmix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
