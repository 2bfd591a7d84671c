package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/features"
	"github.com/blis-sim/blis/physics"
)

type physicsOpts struct {
	model, hardware string
	tp              int
	knobs           physics.VLLMKnobs
	asJSON, list    bool
}

func newPhysicsCmd() *cobra.Command {
	o := physicsOpts{knobs: physics.DefaultVLLMKnobs()}
	cmd := &cobra.Command{
		Use:   "physics",
		Short: "Show the derived constants and example feature vectors of a configuration",
		Long: `physics derives every constant of the physics model for a model, a GPU, a
tensor-parallel degree and vLLM settings, then shows the beta features of a
few typical steps and the alpha features of a typical arrival.

--model and --hardware take a shipped name (see --list) or a path to a
HuggingFace config.json / hardware spec JSON. When --kv-blocks-gpu is 0 the
number of GPU KV blocks is derived from device memory the way vLLM sizes its
cache, and the split is shown.`,
		Example: `  calibrate physics
  calibrate physics --model mixtral-8x7b --hardware a100-80gb --tp 4
  calibrate physics --model ./config.json --hardware ./my-gpu.json --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.list {
				return listShipped(cmd.OutOrStdout())
			}
			if err := applyOffloadRule(cmd.Flags(), &o.knobs); err != nil {
				return err
			}
			return runPhysics(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "llama-3.1-8b", modelHelp())
	f.StringVar(&o.hardware, "hardware", "h100-sxm", hardwareHelp())
	f.IntVar(&o.tp, "tp", 1, tpHelp)
	addKnobFlags(f, &o.knobs, "GPU KV blocks; 0 derives them from device memory")
	f.BoolVar(&o.asJSON, "json", false, "print JSON instead of tables")
	f.BoolVar(&o.list, "list", false, "list the shipped models and hardware and exit")
	return cmd
}

// modelHelp and hardwareHelp describe --model and --hardware with the
// shipped names; tpHelp describes --tp.
func modelHelp() string {
	return "shipped model name (" + strings.Join(physics.BuiltinModels(), ", ") + ") or path to a HuggingFace config.json"
}

func hardwareHelp() string {
	return "shipped hardware name (" + strings.Join(physics.BuiltinHardware(), ", ") + ") or path to a hardware spec JSON"
}

const tpHelp = "tensor-parallel degree: GPUs per engine"

func listShipped(w io.Writer) error {
	fmt.Fprintln(w, "models:  ", strings.Join(physics.BuiltinModels(), ", "))
	fmt.Fprintln(w, "hardware:", strings.Join(physics.BuiltinHardware(), ", "))
	return nil
}

// example is one typical step and the arrival state seen beside it.
type example struct {
	Name  string              `json:"name"`
	Alpha features.AlphaInput `json:"alpha_input"`
	Beta  features.BetaInput  `json:"beta_input"`
}

func examples(c *physics.PhysicsConfig) []example {
	k := c.Knobs
	kvFree := func(usage float64) float64 { return (1 - usage) * c.GPUKVCapacityBytes }
	var prefill, decode, mixed, full features.BetaInput
	prefill.AddPrefill(0, 512)
	for i := int64(0); i < 64; i++ {
		decode.AddDecode(2048, 128)
	}
	mixed.AddPrefill(1024, 512)
	for i := int64(0); i < 32; i++ {
		mixed.AddDecode(1024, 64)
	}
	chunk := k.MaxBatchedTokens - (k.MaxNumSeqs - 1)
	for i := int64(0); i < k.MaxNumSeqs-1; i++ {
		full.AddDecode(1024, 64)
	}
	if chunk > 0 {
		full.AddPrefill(0, chunk)
	}
	return []example{
		{"idle, 512-token prompt", features.AlphaInput{PromptTokens: 512, KVFreeBytes: kvFree(0)}, prefill},
		{"64 decodes at 2K context", features.AlphaInput{RunningDepth: 64, KVUsageRatio: 0.3, PromptTokens: 512, KVFreeBytes: kvFree(0.3)}, decode},
		{"chunk + 32 decodes", features.AlphaInput{RunningDepth: 33, WaitingDepth: 4, KVUsageRatio: 0.5, PromptTokens: 2048, KVFreeBytes: kvFree(0.5)}, mixed},
		{"full token budget", features.AlphaInput{RunningDepth: k.MaxNumSeqs, WaitingDepth: 100, KVUsageRatio: 0.95, PromptTokens: 2048, KVFreeBytes: kvFree(0.95)}, full},
	}
}

func runPhysics(w, stderr io.Writer, o physicsOpts) error {
	m, err := physics.LoadModel(o.model)
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	printNotes(stderr, m.Notes)
	h, err := physics.LoadHardware(o.hardware)
	if err != nil {
		return fmt.Errorf("--hardware: %w", err)
	}
	c, err := physics.NewPhysicsConfig(m, h, o.tp, o.knobs)
	if err != nil {
		if err = knobFlagError(err); !strings.HasPrefix(err.Error(), "--") {
			// The model, the hardware and the TP degree together (tp 3
			// does not divide 32 heads; the model does not fit), as blis
			// run names them.
			err = fmt.Errorf("--model, --hardware, --tp: %w", err)
		}
		return err
	}
	ex := examples(c)
	if o.asJSON {
		type exOut struct {
			example
			AlphaFeatures map[string]float64 `json:"alpha_features"`
			BetaFeatures  map[string]float64 `json:"beta_features"`
		}
		out := struct {
			Model    physics.ModelSpec       `json:"model"`
			Hardware physics.HardwareSpec    `json:"hardware"`
			TP       int                     `json:"tp"`
			VLLM     physics.VLLMKnobs       `json:"vllm"`
			Physics  *physics.PhysicsConfig  `json:"physics_config"`
			KVBudget *physics.KVMemoryBudget `json:"kv_budget,omitempty"`
			// DefaultLatency is what blis run takes for this configuration
			// without --latency or --coefficients, and why.
			DefaultLatency latencyChoice `json:"default_latency"`
			Examples       []exOut       `json:"examples"`
		}{Model: c.Model, Hardware: c.Hardware, TP: c.TP, VLLM: c.Knobs, Physics: c, DefaultLatency: defaultLatency(c)}
		if c.KVBudget.Blocks > 0 {
			out.KVBudget = &c.KVBudget
		}
		for _, e := range ex {
			a, b := features.AlphaFeatures(c, e.Alpha), features.BetaFeatures(c, e.Beta)
			eo := exOut{example: e, AlphaFeatures: map[string]float64{}, BetaFeatures: map[string]float64{}}
			for i, v := range a {
				eo.AlphaFeatures[features.AlphaNames[i]] = v
			}
			for i, v := range b {
				eo.BetaFeatures[features.BetaNames[i]] = v
			}
			out.Examples = append(out.Examples, eo)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printPhysics(w, c, ex)
}

func printPhysics(w io.Writer, c *physics.PhysicsConfig, ex []example) error {
	m := c.Model
	kind := "dense"
	if m.IsMoE() {
		kind = fmt.Sprintf("MoE %d experts, top %d", m.NumExperts, m.TopK)
	}
	attn := "MHA"
	if m.NumKVHeads < m.NumHeads {
		attn = "GQA"
	}
	mlp := "gated MLP"
	if m.NMLPProj == 2 {
		mlp = "plain MLP"
	}
	fmt.Fprintf(w, "%s: %s, %s %d/%d heads, %s, %d layers, %g bytes/param\n", m.Name, kind, attn, m.NumHeads, m.NumKVHeads, mlp, m.NumLayers, m.BytesPerParam)
	gemm := "measured"
	if c.Hardware.GEMMTFlops == 0 {
		gemm = fmt.Sprintf("assumed: %g of the peak", physics.DefaultGEMMShare)
	}
	fmt.Fprintf(w, "on %d × %s (%.4g TFLOP/s peak, %.4g sustained in GEMMs (%s; the roofline's ceiling), %.4g TB/s each)\n",
		c.TP, c.Hardware.Name, c.Hardware.TFlopsPeak, c.Hardware.SustainedTFlops(), gemm, c.Hardware.BwPeakTBs)
	if c.TP > 1 {
		coll := c.Hardware.Collectives()
		cc := coll.CC
		if cc == "" {
			cc = "unknown"
		}
		msg := float64(64*m.HiddenSize) * m.BytesPerParam
		s, path := coll.AllReduce(msg, c.TP)
		fmt.Fprintf(w, "interconnect %s, %g GB/s each way, compute capability %s: a decode batch of 64's all-reduce (%.3g MiB) takes %.1f µs by %s (docs/physics-spec.md §4b)\n",
			coll.Kind, c.Hardware.InterconnectBandwidthGBs, cc, msg/(1<<20), s*1e6, path)
	}
	d := defaultLatency(c)
	fmt.Fprintf(w, "latency model blis run takes by default: %s (%s)\n", d.Model+coefficientsSuffix(d), d.Why)
	if d.FittedOn != "" {
		fmt.Fprintf(w, "  provenance: %s\n", d.FittedOn)
		if d.BetaCVMAPE > 0 {
			fmt.Fprintf(w, "  held-out step-time error (cross-validated MAPE): %.1f %%\n", 100*d.BetaCVMAPE)
		}
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, v float64, unit string) { fmt.Fprintf(tw, "  %s\t%.6g\t%s\n", name, v, unit) }
	fmt.Fprintln(tw, "derived constants")
	row("flops_linear_per_token", c.FlopsLinearPerToken, "FLOP (LM head included)")
	row("attn_flops_per_work_unit", c.AttnFlopsPerWorkUnit, "FLOP per (query, key) pair, all layers")
	row("weight_bytes_total", c.WeightBytesTotal, "bytes read by a one-token step")
	if m.IsMoE() {
		row("effective_weight_bytes(1)", c.EffectiveWeightBytes(1), "bytes")
		row("effective_weight_bytes(256)", c.EffectiveWeightBytes(256), "bytes")
	}
	row("param_bytes_resident", c.ParamBytesResident, "bytes on the TP group")
	row("kv_bytes_per_token", c.KVBytesPerToken, "bytes")
	row("hw_peak_flops", c.HWPeakFlops, "FLOP/s, TP group")
	row("hw_peak_bandwidth", c.HWPeakBandwidth, "bytes/s, TP group")
	row("hw_pcie_bandwidth_eff", c.HWPCIeBandwidthEff, "bytes/s, TP group × pcie_efficiency")
	row("hw_interconnect_bw", c.HWInterconnectBW, "bytes/s, one device")
	row("comm_bytes_per_token", c.CommBytesPerToken, "bytes sent per device")
	row("roofline_step_time", c.RooflineStepTime, "s, a full token budget")
	fmt.Fprintf(tw, "  total_kv_blocks_gpu\t%d\t× %d tokens = %d tokens\n", c.Knobs.TotalKVBlocksGPU, c.Knobs.BlockSizeTokens, c.Knobs.TotalKVBlocksGPU*c.Knobs.BlockSizeTokens)
	if err := tw.Flush(); err != nil {
		return err
	}
	if b := c.KVBudget; b.Blocks > 0 {
		gib := func(x float64) float64 { return x / (1 << 30) }
		fmt.Fprintf(w, "  (derived per device: %.2f GiB requested − %.2f weights − %.2f activations − %.2f overhead = %.2f GiB of KV)\n",
			gib(b.Requested), gib(b.Weights), gib(b.Activations), gib(b.Overhead), gib(b.KV))
	}

	betas := make([][features.NumBeta]float64, len(ex))
	alphas := make([][features.NumAlpha]float64, len(ex))
	for i, e := range ex {
		betas[i] = features.BetaFeatures(c, e.Beta)
		alphas[i] = features.AlphaFeatures(c, e.Alpha)
	}
	table := func(title string, names []string, value func(ex, feat int) float64) error {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := title + "\t"
		for _, e := range ex {
			head += e.Name + "\t"
		}
		fmt.Fprintln(tw, head)
		for j, name := range names {
			line := fmt.Sprintf("%2d %s\t", j+1, name)
			for i := range ex {
				line += fmt.Sprintf("%-10.4g\t", value(i, j))
			}
			fmt.Fprintln(tw, line)
		}
		return tw.Flush()
	}
	if err := table("beta features of a step", features.BetaNames[:], func(i, j int) float64 { return betas[i][j] }); err != nil {
		return err
	}
	return table("alpha features of an arrival", features.AlphaNames[:], func(i, j int) float64 { return alphas[i][j] })
}

// latencyChoice is the latency model blis run takes for a configuration
// without --latency or --coefficients (deploy's rule: the physics model
// with a shipped coefficient file fitted on the configuration, else the
// roofline), and why.
type latencyChoice struct {
	Model        string `json:"model"`
	Coefficients string `json:"coefficients,omitempty"`
	Why          string `json:"why"`
	// FittedOn and BetaCVMAPE are the shipped file's provenance: what it
	// was fitted on, and its held-out (cross-validated) step-time error.
	FittedOn   string  `json:"fitted_on,omitempty"`
	BetaCVMAPE float64 `json:"beta_cv_mape,omitempty"`
}

func defaultLatency(c *physics.PhysicsConfig) latencyChoice {
	if s := coefficients.FindShipped(c); s != nil {
		why := "a shipped coefficient file was fitted on this model, GPU, TP and vLLM settings"
		switch n := s.File.Provenance.Notes; {
		case strings.HasPrefix(n, "MEASURED"):
			why += ", on measured step times"
		case strings.Contains(n, "measured-kernel model"):
			why += ", on step times built from measured kernel profiles"
		default:
			why += ", on a simulated trace"
		}
		d := latencyChoice{Model: "physics", Coefficients: "builtin:" + s.Name, Why: why, FittedOn: s.File.Provenance.Notes}
		if s.File.Fit != nil {
			d.BetaCVMAPE = s.File.Fit.BetaCVMAPE
		}
		return d
	}
	return latencyChoice{Model: "roofline", Why: "no shipped coefficient file was fitted on this configuration; --coefficients gives one fitted elsewhere, with a warning"}
}

func coefficientsSuffix(d latencyChoice) string {
	if d.Coefficients == "" {
		return ""
	}
	return " with " + d.Coefficients
}
