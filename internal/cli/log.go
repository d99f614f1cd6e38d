package cli

import (
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"gopkg.in/natefinch/lumberjack.v2"
)

// LogConfig is the logging part of dm-master's and dm-worker's flags (and --config keys).
type LogConfig struct {
	Level      string // debug, info, warn or error
	Format     string // json or text (DM's log-format)
	File       string // empty: stderr
	MaxSize    int    // megabytes a log file grows to before it is rotated
	MaxDays    int    // days a rotated file is kept (0: no limit)
	MaxBackups int    // rotated files kept (0: no limit)
}

// LogFlags defines --log-level, --log-format, --log-file, --log-max-size, --log-max-days and
// --log-max-backups on fs.
func LogFlags(fs *flag.FlagSet) *LogConfig {
	c := &LogConfig{}
	fs.StringVar(&c.Level, "log-level", "info", "debug, info, warn or error")
	fs.Func("L", "the same as --log-level (DM's short form)", func(s string) error { c.Level = s; return nil })
	fs.StringVar(&c.Format, "log-format", "json", "json or text")
	fs.StringVar(&c.File, "log-file", "", "log file (default: stderr); rotated by size")
	fs.IntVar(&c.MaxSize, "log-max-size", 300, "megabytes the --log-file grows to before it is rotated")
	fs.IntVar(&c.MaxDays, "log-max-days", 0, "days a rotated log file is kept (0: no limit)")
	fs.IntVar(&c.MaxBackups, "log-max-backups", 0, "rotated log files kept (0: no limit)")
	return c
}

// NewLogger returns a zap logger at level, in JSON, writing to file (stderr when empty), without
// rotation. dmctl and tests use it; the servers use LogConfig.Build.
func NewLogger(level, file string) (*zap.Logger, error) {
	return (&LogConfig{Level: level, Format: "json", File: file}).Build()
}

// Build returns the logger c describes. A --log-file is rotated when it reaches MaxSize megabytes:
// the old file is renamed with a timestamp (name-2006-01-02T15-04-05.000.ext) and compressed never.
func (c *LogConfig) Build() (*zap.Logger, error) {
	var level zapcore.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", c.Level, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch c.Format {
	case "json", "":
		encoder = zapcore.NewJSONEncoder(enc)
	case "text":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("--log-format %q: use json or text", c.Format)
	}
	if c.MaxSize < 1 {
		return nil, fmt.Errorf("--log-max-size %d: must be at least 1 (megabytes)", c.MaxSize)
	}
	if c.MaxDays < 0 || c.MaxBackups < 0 {
		return nil, fmt.Errorf("--log-max-days and --log-max-backups must not be negative")
	}
	var out zapcore.WriteSyncer = zapcore.Lock(os.Stderr)
	if c.File != "" {
		// Fail now on a file that cannot be written, rather than on the first line.
		f, err := os.OpenFile(c.File, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("--log-file: %w", err)
		}
		f.Close()
		out = zapcore.AddSync(&lumberjack.Logger{Filename: c.File, MaxSize: c.MaxSize, MaxAge: c.MaxDays, MaxBackups: c.MaxBackups, LocalTime: true})
	}
	core := zapcore.NewCore(encoder, out, level)
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(out), zap.AddStacktrace(zapcore.ErrorLevel)), nil
}
