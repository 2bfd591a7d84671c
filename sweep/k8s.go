package sweep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
)

// K8sJob is a Kubernetes Indexed Job that runs a sweep's shards, one pod
// per shard: each runs blis sweep with the sweep's own arguments and
// --shard JOB_COMPLETION_INDEX/N (the index the Job controller gives
// each pod), writing its rows to /out/shard-I.csv on a volume claim.
// The input files (the experiment, the grid, a policy file) travel in a
// ConfigMap mounted as the pods' working directory, /sweep.
type K8sJob struct {
	Name        string // the Job's name; the ConfigMap is Name-inputs
	Image       string // an image with blis on its PATH
	Shards      int
	Parallelism int    // pods at once (0: every shard)
	Claim       string // the PersistentVolumeClaim mounted at /out
	// Args are blis sweep's arguments, input files named by their names
	// in Files; Manifest adds --shard, --workers and --out. Local are the
	// same arguments with the input files' local paths, for the command
	// that merges the shards (nil: Args). AddArgs and AddFile add to both.
	Args, Local []string
	Files       []K8sFile
}

// AddArgs adds arguments that are the same in the pods and locally.
func (j *K8sJob) AddArgs(args ...string) {
	j.Args = append(j.Args, args...)
	j.Local = append(j.Local, args...)
}

// K8sFile is an input file of the Job, by its name in /sweep.
type K8sFile struct {
	Name string
	Data []byte
}

var (
	k8sName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$`)
	// imageRef is the characters of an image reference (the distribution
	// project's reference grammar: a name of path components, a tag, a
	// digest), not its full grammar: enough to keep a space, a newline or
	// a quote out of the manifest.
	imageRef = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/:@+-]*$`)
	// configMapKey is what a ConfigMap's data key may hold
	// (kubernetes/apimachinery's IsConfigMapKey).
	configMapKey = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

// Manifest writes the ConfigMap and the Job as one YAML stream (kubectl
// apply -f). The same job gives the same bytes.
func (j *K8sJob) Manifest() ([]byte, error) {
	if !k8sName.MatchString(j.Name) {
		return nil, fmt.Errorf("--job-name %q: lower-case letters, digits and '-', 1 to 52 characters, starting and ending with a letter or digit", clip.String(j.Name))
	}
	if j.Image == "" {
		return nil, fmt.Errorf("the Job needs an image with blis on its PATH (--image)")
	}
	if !imageRef.MatchString(j.Image) || len(j.Image) > 4096 {
		return nil, fmt.Errorf("--image %q: an image reference is [REGISTRY/]NAME[:TAG][@DIGEST], letters, digits and . _ - / : @ only, at most 4096 characters", clip.String(j.Image))
	}
	if j.Shards < 1 || j.Shards > 100000 {
		return nil, fmt.Errorf("shards must be in [1, 100000] (a Job's completions), got %d", j.Shards)
	}
	par := j.Parallelism
	if par <= 0 || par > j.Shards {
		par = j.Shards
	}
	if !k8sName.MatchString(j.Claim) {
		return nil, fmt.Errorf("--claim %q: lower-case letters, digits and '-', 1 to 52 characters, starting and ending with a letter or digit", clip.String(j.Claim))
	}
	files := slices.Clone(j.Files)
	slices.SortFunc(files, func(a, b K8sFile) int { return strings.Compare(a.Name, b.Name) })
	var data []*yaml.Node
	for i, f := range files {
		if i > 0 && files[i-1].Name == f.Name {
			return nil, fmt.Errorf("two input files named %s", f.Name)
		}
		if !configMapKey.MatchString(f.Name) || len(f.Name) > 253 {
			return nil, fmt.Errorf("input file name %q: a ConfigMap key is letters, digits and - . _, at most 253 characters (K8sJob.AddFile makes one)", clip.String(f.Name))
		}
		v := str(string(f.Data))
		if !strings.ContainsAny(string(f.Data), "\t\r") {
			v.Style = yaml.LiteralStyle
		}
		data = append(data, str(f.Name), v)
	}
	local := j.Local
	if local == nil {
		local = j.Args
	}
	n := strconv.Itoa(j.Shards)
	args := append([]string{"sweep"}, j.Args...)
	args = append(args, "--shard", "JOB_COMPLETION_INDEX/"+n, "--workers", "1", "--out", "/out/shard-{shard}.csv", "--quiet")
	cm := mapping(
		"apiVersion", str("v1"), "kind", str("ConfigMap"),
		"metadata", mapping("name", str(j.Name+"-inputs")),
		"data", &yaml.Node{Kind: yaml.MappingNode, Content: data},
	)
	cm.HeadComment = fmt.Sprintf("blis sweep as a Kubernetes Indexed Job (docs/sweeps.md): %d pods, one per shard, each\n"+
		"running `blis sweep ... --shard JOB_COMPLETION_INDEX/%d` and writing /out/shard-I.csv\n"+
		"on the volume claim %s (create it first, ReadWriteMany when the pods may land\n"+
		"on several nodes). Then merge the shards, in index order, with the same arguments:\n"+
		"  blis sweep %s --rows /out/shard-0.csv ... --out table.parquet",
		j.Shards, j.Shards, j.Claim, strings.Join(quoteArgs(local), " "))
	job := mapping(
		"apiVersion", str("batch/v1"), "kind", str("Job"),
		"metadata", mapping("name", str(j.Name)),
		"spec", mapping(
			"completionMode", str("Indexed"),
			"completions", num(j.Shards),
			"parallelism", num(par),
			"backoffLimitPerIndex", num(1),
			"template", mapping(
				"spec", mapping(
					"restartPolicy", str("Never"),
					"containers", seq(mapping(
						"name", str("blis"),
						"image", str(j.Image),
						"workingDir", str("/sweep"),
						"command", seq(str("blis")),
						"args", seq(strs(args)...),
						"resources", mapping("requests", mapping("cpu", str("1"), "memory", str("1Gi"))),
						"volumeMounts", seq(
							mapping("name", str("inputs"), "mountPath", str("/sweep"), "readOnly", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"}),
							mapping("name", str("out"), "mountPath", str("/out")),
						),
					)),
					"volumes", seq(
						mapping("name", str("inputs"), "configMap", mapping("name", str(j.Name+"-inputs"))),
						mapping("name", str("out"), "persistentVolumeClaim", mapping("claimName", str(j.Claim))),
					),
				),
			),
		),
	)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, doc := range []*yaml.Node{cm, job} {
		if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
func num(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}

func strs(s []string) []*yaml.Node {
	out := make([]*yaml.Node, len(s))
	for i, v := range s {
		out[i] = str(v)
	}
	return out
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Content: items}
}

func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for i := 0; i < len(kv); i += 2 {
		n.Content = append(n.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

// quoteArgs quotes arguments for a shell, in the manifest's comment: a
// plain word as it is, else in single quotes, a control character
// (a newline would end the comment) as $'\NNN'.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,") == "" {
			out[i] = a
			continue
		}
		var b strings.Builder
		b.WriteByte('\'')
		for _, r := range a {
			switch {
			case r == '\'':
				b.WriteString(`'\''`)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, `'$'\%03o''`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('\'')
		out[i] = b.String()
	}
	return out
}

// AddFile carries the input file path of flag (config, grid, ...) in
// the Job's ConfigMap and passes it to blis sweep by its key there
// (ConfigMapKey); the merge command names path.
func (j *K8sJob) AddFile(flag, path string) error {
	data, err := inputfile.Read(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	name := ConfigMapKey(flag, filepath.Base(path))
	j.Files = append(j.Files, K8sFile{Name: name, Data: data})
	j.Args = append(j.Args, "--"+flag, name)
	j.Local = append(j.Local, "--"+flag, path)
	return nil
}

// ConfigMapKey is the ConfigMap key of the input file base of flag:
// FLAG-BASE when base is letters, digits and - . _ (what kubectl apply
// takes); else base with each run of other bytes made one '_', clipped,
// and 8 hex digits of its SHA-256 before the extension, so that two bases
// never share a key: "my exp's.yaml" is "config-my_exp_s-e90043df.yaml".
// The key is at most 253 characters.
func ConfigMapKey(flag, base string) string {
	key := flag + "-" + base
	if configMapKey.MatchString(base) && len(key) <= 253 {
		return key
	}
	ext := filepath.Ext(base)
	if !configMapKey.MatchString(ext) || len(ext) > 16 {
		ext = ""
	}
	stem := strings.TrimSuffix(base, ext)
	var b strings.Builder
	under := false
	for i := 0; i < len(stem); i++ {
		c := stem[i]
		if c < 0x80 && configMapKey.MatchString(string(c)) {
			b.WriteByte(c)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	clipped := b.String()
	sum := sha256.Sum256([]byte(base))
	suffix := "-" + hex.EncodeToString(sum[:4]) + ext
	if room := 253 - len(flag) - 1 - len(suffix); len(clipped) > room {
		clipped = clipped[:room]
	}
	return flag + "-" + clipped + suffix
}
