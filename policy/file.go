package policy

import (
	"fmt"
	"reflect"

	"github.com/blis-sim/blis/internal/inputfile"
	"github.com/blis-sim/blis/internal/yamlfile"
)

// File is a policy file (blis run --policy-config) as given: the sections
// it sets, each resolved, and where each key is for errors. A section the
// file leaves out is nil.
//
//	version: 1          # optional
//	admission: {type: token-bucket, params: {capacity: 50000}}
//	routing:
//	  type: weighted
//	  params:
//	    scorers: {prefix-affinity: 3, load-balance: 1}
type File struct {
	Source   string
	Sections [6]*Section // by Kinds' order
	Raw      [6]*Raw
	Doc      *yamlfile.Doc
}

// FileYAML is a policy file's shape; the experiment file's policies
// section has the same.
type FileYAML struct {
	Admission *Raw `yaml:"admission"`
	Priority  *Raw `yaml:"priority"`
	Routing   *Raw `yaml:"routing"`
	Scheduler *Raw `yaml:"scheduler"`
	Autoscale *Raw `yaml:"autoscale"`
	// Disaggregation was added after version 1's first five sections:
	// a file without it means never.
	Disaggregation *Raw `yaml:"disaggregation"`
}

// Raws lists f's sections by Kinds' order.
func (f *FileYAML) Raws() [6]*Raw {
	return [6]*Raw{f.Admission, f.Priority, f.Routing, f.Scheduler, f.Autoscale, f.Disaggregation}
}

// Ptr is f's section of kind, for setting it.
func (f *FileYAML) Ptr(kind Kind) **Raw {
	switch kind {
	case Admission:
		return &f.Admission
	case Priority:
		return &f.Priority
	case Routing:
		return &f.Routing
	case Scheduler:
		return &f.Scheduler
	case Autoscale:
		return &f.Autoscale
	case Disaggregation:
		return &f.Disaggregation
	}
	panic("policy: no section " + string(kind))
}

type policyFileYAML struct {
	Version  *int `yaml:"version"`
	FileYAML `yaml:",inline"`
}

// Mappings name the file's mappings for unknown-key errors.
var Mappings = map[string]yamlfile.Mapping{
	"policy.policyFileYAML": {What: "a policy file", Keys: reflect.TypeOf(struct {
		Version        int `yaml:"version"`
		Admission      int `yaml:"admission"`
		Priority       int `yaml:"priority"`
		Routing        int `yaml:"routing"`
		Scheduler      int `yaml:"scheduler"`
		Autoscale      int `yaml:"autoscale"`
		Disaggregation int `yaml:"disaggregation"`
	}{})},
	"policy.FileYAML": {What: "policies", Keys: reflect.TypeOf(FileYAML{})},
	"policy.Raw":      {What: "a policy section", Keys: reflect.TypeOf(Raw{})},
}

// LoadFile reads and resolves a policy file.
func LoadFile(path string) (*File, error) {
	data, err := inputfile.Read(path)
	if err != nil {
		return nil, err
	}
	return ParseFile(data, path)
}

// ParseFile resolves a policy file's bytes; source names it in errors,
// which read file:line: section.key: message.
func ParseFile(data []byte, source string) (*File, error) {
	var y policyFileYAML
	doc, err := yamlfile.Decode(data, source, &y, Mappings)
	if err != nil {
		return nil, err
	}
	if y.Version != nil && *y.Version != 1 {
		return nil, doc.Errorf("version", "this blis reads version 1 policy files, got %d", *y.Version)
	}
	f := &File{Source: source, Doc: doc, Raw: y.Raws()}
	for i, r := range f.Raw {
		if r == nil {
			continue
		}
		s, err := ParseSection(Kinds[i], *r)
		if err != nil {
			return nil, LocateError(doc, string(Kinds[i]), err)
		}
		f.Sections[i] = &s
	}
	return f, nil
}

// LocateError places a *FieldError of the section at prefix in doc
// (file:line: prefix.key: message); other errors get the file's name.
func LocateError(doc *yamlfile.Doc, prefix string, err error) error {
	if fe, ok := err.(*FieldError); ok {
		return doc.Errorf(prefix+"."+fe.Key, "%v", fe.Err)
	}
	return fmt.Errorf("%s: %s: %w", doc.Source, prefix, err)
}
