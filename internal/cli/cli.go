// Package cli holds what the three commands share: the TOML --config file that sets flags, and the
// zap logger.
package cli

import (
	"flag"
	"fmt"
	"sort"

	"github.com/BurntSushi/toml"
)

// Parse defines --config on fs, parses args (no positional arguments), then sets every flag not
// given on the command line from the --config file, if any.
func Parse(fs *flag.FlagSet, args []string) error {
	config := fs.String("config", "", "TOML file whose keys are these flags' names (flags given on the command line win)")
	if err := fs.Parse(args); err != nil {
		return err
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
	var kv map[string]any
	if _, err := toml.DecodeFile(path, &kv); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || k == "config" {
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
