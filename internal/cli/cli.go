// Package cli holds what the three commands share: the TOML --config file that sets flags, and the
// zap logger.
package cli

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"sort"

	"github.com/BurntSushi/toml"
)

// Parse defines --config on fs, parses args (no positional arguments), then sets every flag not
// given on the command line from the --config file, if any.
func Parse(fs *flag.FlagSet, args []string) error {
	config := fs.String("config", "", "TOML file whose keys are these flags' names (flags given on the command line win)")
	version := fs.Bool("V", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Fprint(fs.Output(), VersionInfo())
		return ErrVersionPrinted
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *config == "" {
		return nil
	}
	return ApplyConfig(fs, *config)
}

// ApplyConfig reads a TOML file whose keys are the flag names (as DM's configuration files are) and
// sets every flag not given on the command line. A key that is not a flag is an error naming the key
// and the file.
func ApplyConfig(fs *flag.FlagSet, path string) error {
	var raw map[string]any
	if _, err := toml.DecodeFile(path, &raw); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	kv := map[string]any{}
	flatten("", raw, kv)
	for table, key := range tableKeys {
		if v, ok := kv[table]; ok {
			delete(kv, table)
			if _, dup := kv[key]; dup {
				return fmt.Errorf("--config %s: both %q and %q are set", path, key, table)
			}
			kv[key] = v
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if long, ok := shortFlags[f.Name]; ok {
			set[long] = true
		}
	})
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || k == "config" || len(k) == 1 {
			return fmt.Errorf("--config %s: key %q is not supported (known keys are the command-line flags)", path, k)
		}
		if set[k] {
			continue // the command line wins
		}
		var s string
		switch v := kv[k].(type) {
		case string:
			s = v
		case int64, bool, float64:
			s = fmt.Sprint(v)
		case []any:
			for i, e := range v {
				if i > 0 {
					s += ","
				}
				s += fmt.Sprint(e)
			}
		default:
			return fmt.Errorf("--config %s: key %q has a value of type %T that is not supported", path, k, v)
		}
		if err := fs.Set(k, s); err != nil {
			return fmt.Errorf("--config %s: key %q: %w", path, k, err)
		}
	}
	return nil
}

// tableKeys are the keys of DM's files that sit in a TOML table, and the flag each one sets:
// dm-master's "[experimental] openapi = true" of DM v5.3.
var tableKeys = map[string]string{"experimental.openapi": "openapi"}

// flatten puts the keys of the tables of m in out as "table.key".
func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			flatten(prefix+k+".", sub, out)
			continue
		}
		out[prefix+k] = v
	}
}

// NoEffect holds the flags (and --config keys) DM defines that mean nothing to Tributary: they are
// accepted, so DM's files and start scripts work unchanged, and Given lists the ones given.
type NoEffect struct {
	why  map[string]string
	vals map[string]*string
}

// NoEffectFlags defines each of names (a flag name and why it has no effect) on fs as a string flag.
func NoEffectFlags(fs *flag.FlagSet, names map[string]string) *NoEffect {
	n := &NoEffect{why: names, vals: map[string]*string{}}
	for name, why := range names {
		n.vals[name] = fs.String(name, "", "DM's; accepted with no effect: "+why)
	}
	return n
}

// Given returns "name=value (why)" for each of the flags that was set, sorted by name.
func (n *NoEffect) Given() []string {
	var out []string
	for name, v := range n.vals {
		if *v != "" {
			out = append(out, fmt.Sprintf("%s=%s (%s)", name, *v, n.why[name]))
		}
	}
	sort.Strings(out)
	return out
}

// shortFlags are DM's one-letter flags and the flag each one stands for: given on the command line,
// the --config key of the long name does not override it.
var shortFlags = map[string]string{"L": "log-level"}

// ErrVersionPrinted is Parse's answer to -V: the version is printed, the command exits with 0.
var ErrVersionPrinted = errors.New("version printed")

// GitHash is the commit the binary was built from, set by make build (-ldflags -X) for builds without
// Go's VCS stamp (-buildvcs=false).
var GitHash string

// VersionInfo is what -V prints, in DM's shape: the module version and the commit the binary was
// built from (Go's build information, else GitHash).
func VersionInfo() string {
	release, commit, dirty, built := "(devel)", cmp.Or(GitHash, "unknown"), "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			release = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			case "vcs.time":
				built = s.Value
			}
		}
	}
	return fmt.Sprintf("Release Version: %s\nGit Commit Hash: %s%s\nCommit Time: %s\nGo Version: %s\n", release, commit, dirty, built, runtime.Version())
}
