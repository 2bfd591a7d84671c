package otlpingest

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// The OpenTelemetry Collector configuration that docs/vllm-tracing.md
// tells a user to run.
const collectorConfig = "../examples/otel-collector.yaml"

// The parts of the collector's configuration the file uses, with the keys
// each component accepts (the otlp receiver's configgrpc.ServerConfig and
// confighttp.ServerConfig; the file exporter's config.schema.yaml in
// opentelemetry-collector-contrib). Decoding with KnownFields fails on any
// other key, so a misspelt key, which the collector would refuse at
// start-up, fails here first.
type collectorFile struct {
	Receivers  map[string]collectorReceiver `yaml:"receivers"`
	Processors map[string]map[string]any    `yaml:"processors"`
	Exporters  map[string]fileExporter      `yaml:"exporters"`
	Service    struct {
		Pipelines map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

type collectorReceiver struct {
	Protocols struct {
		GRPC *struct {
			Endpoint             string         `yaml:"endpoint"`
			Transport            string         `yaml:"transport"`
			TLS                  map[string]any `yaml:"tls"`
			MaxRecvMsgSizeMiB    int            `yaml:"max_recv_msg_size_mib"`
			MaxConcurrentStreams int            `yaml:"max_concurrent_streams"`
			ReadBufferSize       int            `yaml:"read_buffer_size"`
			WriteBufferSize      int            `yaml:"write_buffer_size"`
			Keepalive            map[string]any `yaml:"keepalive"`
			IncludeMetadata      bool           `yaml:"include_metadata"`
		} `yaml:"grpc"`
		HTTP *struct {
			Endpoint           string         `yaml:"endpoint"`
			TLS                map[string]any `yaml:"tls"`
			CORS               map[string]any `yaml:"cors"`
			MaxRequestBodySize int64          `yaml:"max_request_body_size"`
			IncludeMetadata    bool           `yaml:"include_metadata"`
			TracesURLPath      string         `yaml:"traces_url_path"`
		} `yaml:"http"`
	} `yaml:"protocols"`
}

type fileExporter struct {
	Path     string `yaml:"path"`
	Rotation *struct {
		MaxMegabytes int  `yaml:"max_megabytes"`
		MaxDays      int  `yaml:"max_days"`
		MaxBackups   int  `yaml:"max_backups"`
		LocalTime    bool `yaml:"localtime"`
	} `yaml:"rotation"`
	Format               string         `yaml:"format"`
	Compression          string         `yaml:"compression"`
	CompressionParams    map[string]any `yaml:"compression_params"`
	CreateDirectory      bool           `yaml:"create_directory"`
	DirectoryPermissions string         `yaml:"directory_permissions"`
	Encoding             string         `yaml:"encoding"`
	FlushInterval        string         `yaml:"flush_interval"`
	Append               bool           `yaml:"append"`
	GroupBy              map[string]any `yaml:"group_by"`
}

// componentType is a component id's type: "file" of "file/vllm".
func componentType(id string) string { typ, _, _ := strings.Cut(id, "/"); return typ }

// TestCollectorConfig checks the collector configuration of
// docs/vllm-tracing.md against what the collector accepts and what the
// ingest reads, and then reads a directory laid out as the file exporter
// lays out its files.
func TestCollectorConfig(t *testing.T) {
	raw, err := os.ReadFile(collectorConfig)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var cfg collectorFile
	require.NoError(t, dec.Decode(&cfg), "%s: a key the collector's components do not have", collectorConfig)

	// The OTLP receiver listens on the OTLP default ports, on loopback.
	otlp, ok := cfg.Receivers["otlp"]
	require.True(t, ok, "an otlp receiver")
	require.NotNil(t, otlp.Protocols.GRPC, "gRPC: vLLM's exporter default (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc)")
	require.NotNil(t, otlp.Protocols.HTTP, "HTTP: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf")
	for ep, port := range map[string]string{otlp.Protocols.GRPC.Endpoint: "4317", otlp.Protocols.HTTP.Endpoint: "4318"} {
		host, p, err := net.SplitHostPort(ep)
		require.NoError(t, err, "endpoint %q", ep)
		require.Equal(t, port, p, "endpoint %q: the OTLP default port", ep)
		require.NotNil(t, net.ParseIP(host), "endpoint %q: an address", ep)
	}
	require.GreaterOrEqual(t, otlp.Protocols.GRPC.MaxRecvMsgSizeMiB, 4, "gRPC messages of at least the 4 MiB OTLP default")

	// Exactly one traces pipeline, whose components are all declared.
	require.Len(t, cfg.Service.Pipelines, 1)
	p, ok := cfg.Service.Pipelines["traces"]
	require.True(t, ok, "a traces pipeline")
	for _, r := range p.Receivers {
		require.Contains(t, cfg.Receivers, r, "pipeline receiver %s is declared", r)
	}
	for _, pr := range p.Processors {
		require.Contains(t, cfg.Processors, pr, "pipeline processor %s is declared", pr)
		require.Equal(t, "batch", componentType(pr), "only the batch processor, which drops nothing")
	}
	require.NotEmpty(t, p.Exporters)

	// Every exporter is a file exporter in a form the ingest reads.
	for _, id := range p.Exporters {
		ex, ok := cfg.Exporters[id]
		require.True(t, ok, "pipeline exporter %s is declared", id)
		require.Equal(t, "file", componentType(id))
		require.True(t, filepath.IsAbs(ex.Path), "%s: an absolute path", id)
		require.Contains(t, []string{"json", "proto"}, ex.Format, "%s: json lines or length-prefixed proto", id)
		require.Empty(t, ex.Compression, "%s: per-message zstd behind a length prefix is no file the ingest reads", id)
		require.Empty(t, ex.Encoding, "%s: an encoding extension replaces the OTLP format", id)
		require.Nil(t, ex.GroupBy, "%s: one file stream", id)
		require.NotNil(t, ex.Rotation, "%s: rotation", id)
		require.Positive(t, ex.Rotation.MaxMegabytes)
		require.Zero(t, ex.Rotation.MaxDays, "%s: no file of a run is deleted for its age", id)
		require.GreaterOrEqual(t, ex.Rotation.MaxBackups, 1000, "%s: no file of a run is deleted for their number", id)
		require.LessOrEqual(t, int64(ex.Rotation.MaxMegabytes)<<20, int64(DefaultMaxRecordBytes), "%s: a file rotates before a record could outgrow the ingest's limit", id)

		// The exporter renames a full file by putting a UTC timestamp before
		// the extension, and starts a new one at path: in name order the
		// rotated files come first, oldest first, and the live file last,
		// so ingesting the directory reads the run in time order.
		dir := t.TempDir()
		base := filepath.Base(ex.Path)
		ext := filepath.Ext(base)
		stem := strings.TrimSuffix(base, ext)
		files := []string{
			stem + "-2026-11-28T10-55-01.123" + ext,
			stem + "-2026-11-28T11-02-47.009" + ext,
			base,
		}
		trace, err := os.ReadFile("../testdata/traces/rotated.1.jsonl")
		require.NoError(t, err)
		trace2, err := os.ReadFile("../testdata/traces/rotated.2.jsonl")
		require.NoError(t, err)
		contents := [][]byte{trace, trace2, []byte("")}
		for i, f := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), contents[i], 0o644))
		}
		sorted := append([]string{}, files...)
		sort.Strings(sorted)
		require.Equal(t, files, sorted, "name order is rotation order")
		m, err := Ingest(FileSources([]string{filepath.Join(dir, files[0]), filepath.Join(dir, files[1]), filepath.Join(dir, files[2])}),
			Options{OutDir: t.TempDir(), Workers: 1})
		require.NoError(t, err)
		require.Equal(t, int64(0), m.Issues.Total, "the rotated trace joins across its files: %+v", m.Issues)
	}
}
