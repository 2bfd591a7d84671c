// Package fit is the training pipeline behind `calibrate fit` and the
// scoring behind `calibrate predict --tables`: it turns the tables that
// `calibrate ingest` writes into the beta (step time) and alpha
// (QUEUED→first SCHEDULED delay) coefficient vectors of the physics latency
// model, the request overheads, and a validation report. It writes no
// file and reads only the tables (LoadTrace); cmd/calibrate owns flags,
// output files and plots. docs/fit.md states every choice the pipeline
// makes and why; this comment is a map of the code.
//
// # Inputs and outputs
//
// A Config is one configuration (model, hardware, TP, vLLM knobs as a
// physics.PhysicsConfig) with the traces recorded on it (LoadTrace: one
// ingest output directory each). Run(cfgs, opt, command) returns a Result:
// a coefficients.File (applies_to is the first configuration,
// fitted_configs lists them all, provenance names every input table by
// SHA-256) and a Report (report.json as is; WriteMarkdown gives report.md),
// plus the hold-out predictions for the residual plots. Evaluate scores an
// existing file on a configuration's traces; FitSteps and ScoreSteps fit
// and score measured steps that come from no trace (a profiler's table).
//
// # Pipeline
//
// Run goes, per configuration and per engine of each trace (each engine is
// a time series of its own):
//
//   - crossCheck: the configuration against what the trace shows (batch
//     limits, chunked prefill, model name); checkDuplicates refuses one
//     steps table listed twice.
//   - newStepIndex: steps in id order, bad rows dropped and counted, the
//     preemption EMA for every γ of Options.Gammas.
//   - betaBuilder (beta.go): one sample per step whose cycle end is known
//     (the next sampled step's start, or the first journey.SCHEDULED of the
//     next step id: SourcePairs, SourceJourney), with its snapshot sums and
//     KV transfers; left-out steps are counted per reason (Count).
//   - alphaBuilder (alpha.go): one sample per request, joined to the
//     sampled step at or before its QUEUED time.
//   - overheadSamples (overheads.go): arrival and departure overheads,
//     fitted by fitLowerEnvelope and fitLine.
//
// Then the outlier rule (betaBuilder.dropOutliers): a beta sample is left
// out when slower than Options.OutlierFactor × the median of its
// configuration's steps in the same power-of-two token bucket (buckets
// under MinOutlierBucket steps are not judged slow), or faster than the
// hardware's lower bound (features.LowerBoundSeconds); every removal is
// listed in the report. Alpha has no outlier rule.
//
// # Objectives and cross-validation
//
// Beta minimizes the squared relative error (coefficients.ObjectiveRelative,
// weights 1/t²) or squared seconds (ObjectiveAbsolute); weighByObjective
// applies it, and Options.CompareObjectives fits the other for the report.
// Each trace is split in time: its last Options.Holdout share is the
// hold-out, the rest Options.Folds contiguous blocks, and fold k pools block
// k of every trace (samples.assignParts). Features are accumulated once per
// γ into ridge sufficient statistics per configuration × part × γ
// (accumulate); every CV, hold-out, leave-one-configuration-out and final
// fit is a sum of those (fitVector), so (λ, γ) is chosen by pooled CV
// without re-reading samples. Alpha's scheduler-overhead correction
// subtracts the median delay of unqueued requests before the fit and adds
// it back to base_bias.
//
// # Invariants
//
//   - Deterministic: the same inputs give byte-identical files and reports
//     on any core count (work is cut into fixed chunks merged in order;
//     TestRunIsDeterministic).
//   - A score over no sample is NaN in Errors (null in JSON, with a note),
//     never 0; the coefficient file, whose fields are numbers, holds 0 and
//     its provenance says why.
//   - The returned file has passed coefficients.File.Validate, so no
//     non-finite value reaches it.
//   - A configuration with fewer than minSamplesPerFold × folds beta
//     training samples is an error; too few alpha samples leave alpha
//     written as zeros, with the reason in the report and provenance.
package fit
