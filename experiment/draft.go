package experiment

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/blis-sim/blis/deploy"
	"github.com/blis-sim/blis/internal/clip"
	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/schema"
	"github.com/blis-sim/blis/internal/yamlfile"
	"github.com/blis-sim/blis/policy"
)

// Draft is an experiment as given, before defaults and checks: an
// experiment file, a legacy deployment file, a policy file and flags, each
// over the ones before (explicit flag > policy file > experiment or
// deployment file > default). Resolve turns it into an Experiment. A
// Draft remembers where each key came from, so that every error names the
// file and line, or the flag, of the value at fault.
type Draft struct {
	f       fileYAML
	sources []source          // files read, in order
	flags   map[string]string // key -> the flag that set it
	sets    map[string]string // key -> the --set that set it
	config  string            // the experiment file, if any
	legacy  string            // the legacy deployment file, if any
}

// source is a file that gave keys: lookup turns an experiment key into
// the file's own key when the file holds it (or an ancestor of it).
type source struct {
	doc    *yamlfile.Doc
	lookup func(key string) (string, bool)
}

// NewDraft is an empty draft: every key at its default.
func NewDraft() *Draft {
	return &Draft{flags: map[string]string{}, sets: map[string]string{}}
}

// Parse reads an experiment file's bytes (source names it in errors;
// relative input paths resolve from its folder). The file must be the
// first thing the draft reads.
func Parse(data []byte, source string) (*Draft, error) {
	d := NewDraft()
	return d, d.load(data, source)
}

// Load reads an experiment file.
func Load(path string) (*Draft, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

func (d *Draft) load(data []byte, src string) error {
	doc, err := yamlfile.DecodeChecked(data, src, &d.f, mappings, func(n *yaml.Node) error { return checkValues(n, "", same) })
	if err != nil {
		return err
	}
	if v := d.f.Version; v != nil && *v != Version {
		return doc.Errorf("version", "this blis reads version %d experiment files, got %d", Version, *v)
	}
	if d.f.Version == nil {
		return fmt.Errorf("%s: the experiment file needs version: %d at its top (docs/experiment.md)", src, Version)
	}
	d.config = src
	d.resolvePaths(filepath.Dir(src))
	d.sources = append(d.sources, source{doc: doc, lookup: func(k string) (string, bool) { return present(doc, k) }})
	return nil
}

// present is key, or its nearest ancestor, when doc holds it.
func present(doc *yamlfile.Doc, key string) (string, bool) {
	for k := key; k != ""; {
		if doc.Has(k) {
			return key, true
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return "", false
}

// resolvePaths makes the input paths the file gave relative to dir
// (model, hardware, coefficients, a workload spec file, a replayed trace)
// when the file exists there; outputs stay relative to the working
// directory.
func (d *Draft) resolvePaths(dir string) {
	if dp := d.f.Deployment; dp != nil {
		for i := range dp.Pools {
			resolvePool(&dp.Pools[i].InstanceYAML, dir)
		}
	}
	if w := d.f.Workload; w != nil {
		resolvePath(w.SpecFile, dir)
		if w.Replay != nil {
			resolvePath(w.Replay.Path, dir)
		}
	}
}

func resolvePool(y *deploy.InstanceYAML, dir string) {
	resolvePath(y.Model, dir)
	resolvePath(y.Hardware, dir)
	if y.Latency != nil {
		resolvePath(y.Latency.Coefficients, dir)
	}
}

func resolvePath(p *string, dir string) {
	if p == nil || *p == "" || filepath.IsAbs(*p) {
		return
	}
	if q := filepath.Join(dir, *p); exists(q) {
		*p = q
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// LoadPolicies reads a policy file (--policy-config): each section it
// gives replaces the draft's.
func (d *Draft) LoadPolicies(path string) error {
	f, err := policy.LoadFile(path)
	if err != nil {
		return err
	}
	if d.f.Policies == nil {
		d.f.Policies = &policy.FileYAML{}
	}
	for i, r := range f.Raw {
		if r != nil {
			*d.f.Policies.Ptr(policy.Kinds[i]) = r
		}
	}
	doc := f.Doc
	d.sources = append(d.sources, source{doc: doc, lookup: func(k string) (string, bool) {
		rest, ok := strings.CutPrefix(k, "policies.")
		if !ok {
			return "", false
		}
		if _, ok := present(doc, rest); !ok {
			return "", false
		}
		return rest, true
	}})
	return nil
}

// Set sets key from text, as --set does (a flag's origin is given by
// SetFlag); origin names the setting in errors. Naming another template
// for a policy section drops the parameters a file gave the old one.
func (d *Draft) Set(key, text, origin string) error {
	segs, err := parsePath(key)
	if err != nil {
		return err
	}
	if kind, ok := strings.CutPrefix(key, "policies."); ok && strings.HasSuffix(kind, ".type") {
		d.replaceSection(strings.TrimSuffix(kind, ".type"), text)
	}
	err = setPath(reflect.ValueOf(&d.f).Elem(), segs, text, "", func(k string) {
		d.sets[k] = origin
	})
	var ke *schema.Error
	if errors.As(err, &ke) && ke.Msg == "" && origin != "" {
		// A value the key's declaration refuses, named by its origin
		// ("--set KEY", "sweep KEY=V").
		return &schema.Error{Key: ke.Key, Err: ke.Err, Range: ke.Range, Msg: origin + ": " + ke.Err.Error()}
	}
	return err
}

// setFlag is Set on behalf of a flag.
func (d *Draft) setFlag(flag, key, text string) error {
	segs, err := parsePath(key)
	if err != nil {
		return err
	}
	err = setPath(reflect.ValueOf(&d.f).Elem(), segs, text, "", func(k string) { d.flags[k] = flag })
	var ke *schema.Error
	if errors.As(err, &ke) && ke.Msg == "" {
		// A value the key's declaration refuses: the flag is the key, and
		// an entry of a mapping (a scorer of --routing-scorers) is named
		// after it.
		msg := flag + ": "
		if sub, ok := strings.CutPrefix(ke.Key, key+"."); ok {
			msg += sub + ": "
		}
		return &schema.Error{Key: ke.Key, Err: ke.Err, Range: ke.Range, Msg: msg + ke.Err.Error()}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// Config is the experiment file the draft read, or "".
func (d *Draft) Config() string { return d.config }

// origin describes where key's value came from: a flag or a --set
// ("--max-num-seqs"), a file ("deploy.yaml:4: pools[0].vllm.max_num_seqs"
// with placed true), or nothing (a default: the key itself, or its flag
// when no file was read).
func (d *Draft) origin(key string) (label string, placed bool) {
	if f, ok := d.givenBy(key); ok {
		return f, false
	}
	for i := len(d.sources) - 1; i >= 0; i-- {
		s := d.sources[i]
		if fk, ok := s.lookup(key); ok {
			return fmt.Sprintf("%s:%d: %s", s.doc.Source, s.doc.Line(fk), fk), true
		}
	}
	if len(d.sources) == 0 {
		if f := flagOf(key); f != "" {
			return f, false
		}
	}
	return key, false
}

// givenBy is the flag or --set that gave key, or one of its ancestors
// (then with key's part below it: "--routing-scorers: queue-depth").
func (d *Draft) givenBy(key string) (string, bool) {
	for k := key; k != ""; {
		if f, ok := d.flags[k]; ok {
			if sub, ok := strings.CutPrefix(key, k+"."); ok {
				f += ": " + sub // an entry of the flag's mapping (a scorer)
			}
			return f, true
		}
		if s, ok := d.sets[k]; ok {
			if sub, ok := strings.CutPrefix(key, k+"."); ok {
				s += ": " + sub
			}
			return s, true
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return "", false
}

// isGiven reports whether key's value was given, by a flag, a --set or a
// file, rather than left to its default.
func (d *Draft) isGiven(key string) bool {
	if d == nil {
		return false
	}
	_, placed := d.origin(key)
	_, given := d.givenBy(key)
	return placed || given
}

// errAt places err, about keys, where the values came from:
// "file:line: key: msg", "--flag: msg", or "key: msg" for defaults.
func (d *Draft) errAt(err error, keys ...string) error {
	labels := make([]string, len(keys))
	prefix := ""
	for i, k := range keys {
		l, placed := d.origin(k)
		if placed {
			// "file:line: key": the first placed key gives the place.
			where, key, _ := strings.Cut(l, ": ")
			if prefix == "" {
				prefix = where + ": "
			}
			l = key
		}
		labels[i] = l
	}
	err = clip.PathErr(err) // a file key's huge value: open's error quotes it
	return &Error{Msg: prefix + strings.Join(dedupe(labels), ", ") + ": " + err.Error(), Keys: keys, Err: err}
}

// name is how a message refers to another key: its flag when no file was
// read (the user gave flags), else the key.
func (d *Draft) name(key string) string {
	if len(d.sources) == 0 {
		if f := flagOf(key); f != "" {
			return f
		}
	}
	return key
}

// firstGiven is the first key under prefix that a flag or --set gave,
// else prefix: the value to name when a whole section is at fault.
func (d *Draft) firstGiven(prefix string) string {
	for _, m := range []map[string]string{d.flags, d.sets} {
		best := ""
		for k := range m {
			if strings.HasPrefix(k, prefix+".") && (best == "" || k < best) {
				best = k
			}
		}
		if best != "" {
			return best
		}
	}
	return prefix
}

// given labels the section at prefix by the first value given in it.
func (d *Draft) given(prefix string) string {
	l, placed := d.origin(d.firstGiven(prefix))
	if placed {
		return l
	}
	return l
}

func (d *Draft) errf(key, format string, args ...any) error {
	return d.errAt(fmt.Errorf(format, args...), key)
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		dup := false
		for _, y := range out {
			dup = dup || x == y
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

// Error is an invalid experiment: Keys are the experiment keys at fault,
// Msg says where they came from and what is wrong.
type Error struct {
	Msg  string
	Keys []string
	Err  error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// placePool places a *deploy.FieldError of pool i's instance.
func (d *Draft) placePool(i int, err error) error {
	var fe *deploy.FieldError
	if !errors.As(err, &fe) {
		return d.errAt(err, fmt.Sprintf("deployment.pools[%d]", i))
	}
	keys := make([]string, len(fe.Fields))
	for j, f := range fe.Fields {
		keys[j] = fmt.Sprintf("deployment.pools[%d].%s", i, f)
	}
	return d.errAt(fe.Err, keys...)
}

// placeSection places a *policy.FieldError of the section of kind.
func (d *Draft) placeSection(kind policy.Kind, err error) error {
	var fe *policy.FieldError
	if errors.As(err, &fe) {
		return d.errAt(fe.Err, "policies."+string(kind)+"."+fe.Key)
	}
	return d.errAt(err, "policies."+string(kind))
}
