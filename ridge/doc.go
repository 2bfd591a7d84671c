// Package ridge fits the linear physics-normalized latency model
// (docs/physics-spec.md §5–6: latency = coefficients · features, in seconds)
// by weighted Ridge regression solved from sufficient statistics.
//
// # Sufficient statistics
//
// Stats holds X'WX (upper triangle of a row-major p×p array), X'Wy, y'Wy, Σw
// and the row count. Add folds in one row without allocating: it buffers 8
// rows and applies them as one rank-8 update of the upper triangle, so each
// entry is loaded and stored once per 8 rows (about 55–65 ns a row at
// p = 16 on one core, 0.6 s for 10 M rows; scalar Go cannot go much below
// ~30 ns without SIMD, and shards on several goroutines scale linearly).
// Readers see buffered rows without modifying the Stats. AddStats and Sub
// merge and remove shards, so the 10 M-row training set can be accumulated
// per config × CV fold × γ in separate goroutines or processes
// (MarshalBinary/UnmarshalBinary store a shard), added, and solved without
// revisiting rows. Add never silently accepts a row with a non-finite x, y or
// w, or with w < 0: it skips it and counts it in Bad, and Solve then returns
// a *BadRowsError naming the count rather than NaN coefficients. Sums are
// plain float64 (no compensation): for 10 M rows the relative error of each
// entry is far below the noise of the data.
//
// # Penalty and scaling
//
// The features span 1e-6 s to 100, so a plain penalty λ·Σβ_j² would shrink
// them very unevenly. Solve minimizes
//
//	Σ_i w_i (y_i − x_i·β)² + λ·Σ_{j penalized} (s_j β_j)²,
//	s_j = sqrt(X'WX_jj / Σw)   (the weighted RMS of column j)
//
// which is Ridge on columns rescaled to unit RMS, expressed without touching
// the data. RMS is used rather than the standard deviation because the bias
// columns are explicit features rather than implicit centering, and because
// columns that are constant within a data set (b10 gqa_ratio within one
// model) must keep a nonzero scale and stay identifiable. Columns marked
// Unpenalized (the constant bias columns a4 and b16) get no penalty term.
// With columns at unit RMS the Gram matrix has Σw on its diagonal, so λ is
// measured against Σw: λ/Σw is the relative shrinkage, and a λ grid should
// scale with the total weight.
//
// A column with X'WX_jj == 0 carries no information in this data (all zeros,
// or only zero-weight rows): it is dropped, its coefficient is 0, and
// Fit.Dropped reports it.
//
// # Solve
//
// Over the kept columns Solve forms A = X'WX + λ·diag(s²) (penalty on
// penalized columns only) and solves it scaled symmetrically,
// M = D A D, b = D X'Wy, β = D γ, with D = diag(1/s_j) for every kept
// column, unpenalized ones included, further normalized by
// 1/sqrt(Σw + λ·[j penalized]) so that M has exactly a unit diagonal
// (D_j = 1/sqrt(A_jj)). This equilibration removes the 1e-12..1e4 spread of
// the raw diagonal and, for large λ, the spread between penalized and
// unpenalized columns, so the condition number of M reflects only the
// correlation between the features; Cholesky's accuracy is invariant to such
// diagonal scaling, but its condition estimate and the SVD threshold below
// become meaningful.
//
// M is factored by Cholesky (gonum mat.Cholesky on a mat.SymDense). If the
// factorization fails (M not positive definite: λ = 0 with collinear columns,
// or collinear unpenalized columns) or its condition estimate exceeds
// MaxCholeskyCond (1e12), Solve falls back to the SVD of M (gonum mat.SVD)
// truncated at σ ≤ SVDRcond·σ_max (1e-12) and returns the minimum-norm
// solution in the scaled coordinates: among the coefficient vectors the data
// leave undetermined it picks the one of smallest Σ(s_j β_j)², the λ → 0⁺
// limit of the same scaled Ridge (two identical columns share the effect
// equally). Fit.Method says
// which ran ("cholesky", "svd", or "none" when every column was dropped),
// Fit.Cond the condition of the system that was solved and Fit.Rank its
// rank. Solve never returns NaN or Inf coefficients: invalid input (p == 0,
// no rows, Σw ≤ 0, bad rows, overflowed statistics, λ < 0 or non-finite,
// len(Unpenalized) not 0 or p) and a non-finite result are errors.
//
// # Scoring and cross-validation
//
// SSE evaluates y'Wy − 2β'X'Wy + β'X'WXβ from statistics alone, clamped at
// 0; its rounding error is about ε·y'Wy. CrossValidate trains on every fold
// but k (summed directly, not total − fold, to avoid cancellation), scores
// the weighted SSE on fold k, sums over folds and divides by the total
// validation Σw (a weighted MSE); the best λ has the smallest MSE, with ties
// (relative 1e-12) going to the larger λ.
package ridge
