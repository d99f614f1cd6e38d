// Package config reads DM-compatible task and source YAML files and checks them, with errors that name
// the file and the field. Keys DM defines but Tributary does not implement are accepted when they hold
// DM's default and refused with "<key> is not supported yet" otherwise; a key DM does not know is an
// error naming it.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes YAML into out, refusing keys out does not define: each is named with its line,
// the part of the file it is in, and the known key nearest to it.
func decodeStrict(file string, data []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		msg := strings.ReplaceAll(err.Error(), "yaml: unmarshal errors:\n  ", "")
		msg = unknownField.ReplaceAllStringFunc(msg, func(m string) string {
			sub := unknownField.FindStringSubmatch(m)
			return "field " + sub[1] + " is not a known key of " + describeKeys(reflect.TypeOf(out), sub[1], sub[2])
		})
		return fmt.Errorf("%s: %s", file, msg)
	}
	return nil
}

var unknownField = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

// describeKeys names the struct type typeName (a type reachable from root, as yaml writes it:
// "config.Task") for a user, with the known key nearest to key when one is near.
func describeKeys(root reflect.Type, key, typeName string) string {
	t := findType(root, typeName, map[reflect.Type]bool{})
	if t == nil {
		return typeName
	}
	what := map[string]string{"Task": "the task file", "Source": "the source file"}[t.Name()]
	if what == "" {
		what = "its section"
	}
	var keys []string
	for i := range t.NumField() {
		if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	best, dist := "", len(key)/3+2
	for _, k := range keys {
		if d := editDistance(key, k); d < dist {
			best, dist = k, d
		}
	}
	if best != "" {
		return what + " (did you mean " + best + "?)"
	}
	return what
}

// findType is the struct type named name (package.Type) reachable from t through fields, pointers,
// slices and maps.
func findType(t reflect.Type, name string, seen map[reflect.Type]bool) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	if t.String() == name {
		return t
	}
	for i := range t.NumField() {
		if found := findType(t.Field(i).Type, name, seen); found != nil {
			return found
		}
	}
	return nil
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// notSupported records keys set away from DM's default.
type notSupported struct {
	file string
	errs []error
}

func (n *notSupported) check(key string, isDefault bool) {
	if !isDefault {
		n.errs = append(n.errs, fmt.Errorf("%s: %s is not supported yet", n.file, key))
	}
}

// because records a key set away from DM's default that Tributary does not mean to implement, with why.
func (n *notSupported) because(key string, isDefault bool, why string) {
	if !isDefault {
		n.errs = append(n.errs, fmt.Errorf("%s: %s is not supported: %s", n.file, key, why))
	}
}

func (n *notSupported) err() error { return errors.Join(n.errs...) }

// BAList is DM's block-allow-list: which schemas and tables are replicated.
type BAList struct {
	DoDBs        []string   `yaml:"do-dbs"`
	IgnoreDBs    []string   `yaml:"ignore-dbs"`
	DoTables     []TableRef `yaml:"do-tables"`
	IgnoreTables []TableRef `yaml:"ignore-tables"`
}

// TableRef names tables in a BAList, with wildcards.
type TableRef struct {
	DBName  string `yaml:"db-name"`
	TblName string `yaml:"tbl-name"`
}

// RouteRule is DM's route rule. A rule without TablePattern routes a whole schema (only the schema is
// renamed).
type RouteRule struct {
	SchemaPattern string `yaml:"schema-pattern"`
	TablePattern  string `yaml:"table-pattern"`
	TargetSchema  string `yaml:"target-schema"`
	TargetTable   string `yaml:"target-table"`
}

// Database is a MySQL/MariaDB endpoint (source from, task target-database).
type Database struct {
	Host     string         `yaml:"host"`
	Port     int            `yaml:"port"`
	User     string         `yaml:"user"`
	Password string         `yaml:"password"`
	Session  map[string]any `yaml:"session"`
	Security *Security      `yaml:"security"` // TLS (config/security.go)
	// MaxAllowedPacket is accepted with no effect: DM deprecated it in v2.0 (the server's value is
	// used), and its template still has it.
	MaxAllowedPacket *int64 `yaml:"max-allowed-packet"`
}

func (d Database) validate(file, field string) []error {
	var errs []error
	if d.Host == "" {
		errs = append(errs, fmt.Errorf("%s: %s.host is empty", file, field))
	}
	if d.Port <= 0 || d.Port > 65535 {
		errs = append(errs, fmt.Errorf("%s: %s.port %d is not a TCP port", file, field, d.Port))
	}
	if d.User == "" {
		errs = append(errs, fmt.Errorf("%s: %s.user is empty", file, field))
	}
	ns := notSupported{file: file}
	errs = append(errs, d.Security.validate(file, field, &ns)...)
	if err := ns.err(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// String prints the endpoint without the password.
func (d Database) String() string { return fmt.Sprintf("%s@%s:%d", d.User, d.Host, d.Port) }

// Source is a DM source file.
type Source struct {
	SourceID        string   `yaml:"source-id"`
	EnableGTID      bool     `yaml:"enable-gtid"`
	Flavor          string   `yaml:"flavor"`
	From            Database `yaml:"from"`
	ServerID        uint32   `yaml:"server-id"`
	EnableRelay     bool     `yaml:"enable-relay"`
	RelayBinlogName string   `yaml:"relay-binlog-name"`
	RelayBinlogGTID string   `yaml:"relay-binlog-gtid"`
	RelayDir        string   `yaml:"relay-dir"`
	CaseSensitive   bool     `yaml:"case-sensitive"`
	Purge           any      `yaml:"purge"`
	Checker         any      `yaml:"checker"`
	// Filters are binlog event filter rules for every task of the source, after the task's own
	// (MergeFilters).
	Filters []FilterRule `yaml:"filters"`
}

var sourceIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ParseSource reads and checks a source file's content; file names it in errors.
func ParseSource(file string, data []byte) (*Source, error) {
	var s Source
	if err := decodeStrict(file, data, &s); err != nil {
		return nil, err
	}
	var errs []error
	if !sourceIDPattern.MatchString(s.SourceID) {
		errs = append(errs, fmt.Errorf("%s: source-id %q must be 1-64 letters, digits, '_', '-' or '.'", file, s.SourceID))
	}
	switch strings.ToLower(s.Flavor) {
	case "", "mysql", "mariadb":
		s.Flavor = strings.ToLower(s.Flavor)
		if s.Flavor == "" {
			s.Flavor = "mysql" // DM's default; the worker also detects MariaDB from the server version
		}
	default:
		errs = append(errs, fmt.Errorf("%s: flavor %q must be mysql or mariadb", file, s.Flavor))
	}
	errs = append(errs, s.From.validate(file, "from")...)
	ns := notSupported{file: file}
	ns.check("enable-relay", !s.EnableRelay)
	ns.check("relay-binlog-name", s.RelayBinlogName == "")
	ns.check("relay-binlog-gtid", s.RelayBinlogGTID == "")
	ns.check("case-sensitive", !s.CaseSensitive)
	for i := range s.Filters {
		s.Filters[i].Name = fmt.Sprintf("filters[%d]", i)
		validateFilter(s.Filters[i], func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s: "+format, append([]any{file}, args...)...))
		})
	}
	if err := errors.Join(append(errs, ns.err())...); err != nil {
		return nil, err
	}
	return &s, nil
}

// Meta is where a task starts on a source when there is no checkpoint.
type Meta struct {
	BinlogName string `yaml:"binlog-name"`
	BinlogPos  uint32 `yaml:"binlog-pos"`
	BinlogGTID string `yaml:"binlog-gtid"`
}

// FilterRule is a binlog event filter (DM's filters): the events, or statements matching sql-pattern,
// of the matching tables are ignored (action Ignore), are the only ones replicated (Do), or stop the
// task (Error).
type FilterRule struct {
	Name          string   `yaml:"-"`
	SchemaPattern string   `yaml:"schema-pattern"`
	TablePattern  string   `yaml:"table-pattern"`
	Events        []string `yaml:"events"`
	SQLPattern    []string `yaml:"sql-pattern"`
	Action        string   `yaml:"action"`
}

// FilterEvents are the event names a filter rule may list (DM's names; "all dml", "all ddl" and
// "all" cover their kinds, "none*" match nothing).
var FilterEvents = []string{"all", "all dml", "all ddl", "none", "none dml", "none ddl",
	"insert", "update", "delete",
	"create database", "drop database", "alter database",
	"create table", "drop table", "truncate table", "rename table", "alter table", "create index", "drop index",
	"create view", "drop view", "alter view",
	"drop table partition", "truncate table partition", "exchange table partition"}

// Instance is one entry of a task's mysql-instances.
type Instance struct {
	SourceID           string    `yaml:"source-id"`
	Meta               *Meta     `yaml:"meta"`
	BlockAllowList     string    `yaml:"block-allow-list"`
	BWList             string    `yaml:"black-white-list"` // DM's old name
	RouteRules         []string  `yaml:"route-rules"`
	SyncerConfigName   string    `yaml:"syncer-config-name"`
	Syncer             *Syncer   `yaml:"syncer"`
	FilterRules        []string  `yaml:"filter-rules"`
	ExpressionFilters  []string  `yaml:"expression-filters"`
	ColumnMappingRules []string  `yaml:"column-mapping-rules"`
	MydumperConfigName string    `yaml:"mydumper-config-name"`
	LoaderConfigName   string    `yaml:"loader-config-name"`
	Mydumper           *Mydumper `yaml:"mydumper"`        // inline, instead of mydumper-config-name
	Loader             *Loader   `yaml:"loader"`          // inline, instead of loader-config-name
	MydumperThread     int       `yaml:"mydumper-thread"` // overrides threads
	LoaderThread       int       `yaml:"loader-thread"`   // overrides pool-size
	SyncerThread       int       `yaml:"syncer-thread"`
	// ValidatorConfigName names a validators entry; only DM's default mode "none" is accepted.
	ValidatorConfigName string `yaml:"validator-config-name"`
}

// MB is a size in MB as DM writes it: a number (64) or a string ("64", or with a unit: "64MiB", "1g").
// Its YAML may be any scalar; the value is checked by ParseTask, which names the key.
type MB string

// UnmarshalYAML takes a YAML number or string.
func (m *MB) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: chunk-filesize must be a number of MB or a string like \"64MiB\"", n.Line)}}
	}
	*m = MB(n.Value)
	return nil
}

// Megabytes returns the size in whole MB (MiB): a bare number is MB, as in DM; a unit K, M, G or T
// (any case, with an optional i and B: KiB, MB, g; all powers of 1024 as in DM) is converted. Empty is 0.
func (m MB) Megabytes() (int, error) {
	s := strings.TrimSpace(string(m))
	if s == "" {
		return 0, nil
	}
	match := sizePattern.FindStringSubmatch(s)
	if match == nil {
		return 0, fmt.Errorf("%q must be a positive number of MB (like 64 or \"64MiB\")", string(m))
	}
	n, err := strconv.Atoi(match[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q must be a positive number of MB (like 64 or \"64MiB\")", string(m))
	}
	mul, div := 1, 1
	switch strings.ToLower(match[2]) {
	case "k":
		div = 1024
	case "g":
		mul = 1024
	case "t":
		mul = 1024 * 1024
	}
	if n%div != 0 || n > math.MaxInt32/mul {
		return 0, fmt.Errorf("%q is not a whole number of MB up to 2 PiB", string(m))
	}
	return n * mul / div, nil
}

var sizePattern = regexp.MustCompile(`^([0-9]+) ?(?:([kKmMgGtT])[iI]?[bB]?)?$`)

// Mydumper is a mydumpers entry (or an instance's inline mydumper): how the dump of a full load
// (task-mode all or full) reads the source. Tributary's dump is its own, in-process; it runs no mydumper
// or dumpling, so only the keys that size its work have a meaning.
type Mydumper struct {
	Threads       int    `yaml:"threads"`        // tables dumped at the same time (default 4)
	Rows          int    `yaml:"rows"`           // rows per chunk; 0 derives them from chunk-filesize
	ChunkFilesize MB     `yaml:"chunk-filesize"` // size of a chunk in MB (default 64)
	StatementSize int    `yaml:"statement-size"` // refused when set
	Where         string `yaml:"where"`          // refused when set
	// SkipTzUTC is accepted, true or false, and has no effect: the dump always reads the source in UTC.
	SkipTzUTC    bool   `yaml:"skip-tz-utc"`
	ExtraArgs    string `yaml:"extra-args"`    // refused when set: there is no dumpling to pass them to
	MydumperPath string `yaml:"mydumper-path"` // refused unless DM's default ./bin/mydumper
}

// dmMydumperPath is DM's default mydumper-path, which DM itself no longer runs; it may appear in task
// files DM wrote and is accepted.
const dmMydumperPath = "./bin/mydumper"

func (m *Mydumper) validate(where string, add func(string, ...any), ns *notSupported) {
	if m.Threads < 0 {
		add("%s.threads %d is negative", where, m.Threads)
	}
	if m.Rows < 0 {
		add("%s.rows %d is negative", where, m.Rows)
	}
	if m.ChunkFilesize != "" {
		if _, err := m.ChunkFilesize.Megabytes(); err != nil {
			add("%s.chunk-filesize %v", where, err)
		}
	}
	if m.StatementSize < 0 {
		add("%s.statement-size %d is negative", where, m.StatementSize)
	}
	if ns == nil {
		return
	}
	ns.check(where+".statement-size", m.StatementSize == 0)
	ns.check(where+".where", m.Where == "")
	ns.because(where+".extra-args", m.ExtraArgs == "", "no dumpling here: the dump is Tributary's own (threads, rows and chunk-filesize set it)")
	ns.because(where+".mydumper-path", m.MydumperPath == "" || m.MydumperPath == dmMydumperPath, "no mydumper is run: the dump is Tributary's own")
}

// Loader is a loaders entry (or an instance's inline loader): how the load of a full load writes the
// dumped rows downstream. The load is logical (SQL statements) and streams from the dump.
type Loader struct {
	PoolSize int `yaml:"pool-size"` // downstream connections of the load (default 4)
	// Dir is accepted and unused: the load streams the dump's rows, it writes and reads no files.
	Dir        string `yaml:"dir"`
	ImportMode string `yaml:"import-mode"` // "", logical, or DM's old names sql and loader; physical is refused
	// OnDuplicate (DM's deprecated name) and OnDuplicateLogical: what a row whose key is already
	// downstream does: error (Tributary's default), ignore or replace.
	OnDuplicate        string `yaml:"on-duplicate"`
	OnDuplicateLogical string `yaml:"on-duplicate-logical"`
	// DM's keys of TiDB Lightning's physical import: refused unless empty or DM's default.
	OnDuplicatePhysical string `yaml:"on-duplicate-physical"`
	ChecksumPhysical    string `yaml:"checksum-physical"`
	Analyze             string `yaml:"analyze"`
	SortingDirPhysical  string `yaml:"sorting-dir-physical"`
	DiskQuotaPhysical   any    `yaml:"disk-quota-physical"`
	RangeConcurrency    int    `yaml:"range-concurrency"`
	CompressKVPairs     string `yaml:"compress-kv-pairs"`
	PDAddr              string `yaml:"pd-addr"`
}

// onDuplicate is the loader's on-duplicate-logical, or else on-duplicate, in lower case ("" if unset).
func (l *Loader) onDuplicate() string {
	if l.OnDuplicateLogical != "" {
		return strings.ToLower(l.OnDuplicateLogical)
	}
	return strings.ToLower(l.OnDuplicate)
}

func (l *Loader) validate(where string, add func(string, ...any), ns *notSupported) {
	if l.PoolSize < 0 {
		add("%s.pool-size %d is negative", where, l.PoolSize)
	}
	switch strings.ToLower(l.ImportMode) {
	case "", "logical", "sql", "loader":
	case "physical":
		if ns != nil {
			ns.errs = append(ns.errs, fmt.Errorf("%s: %s.import-mode physical needs TiDB Lightning's physical import; use logical", ns.file, where))
		}
	default:
		add("%s.import-mode %q must be logical (or DM's old sql or loader)", where, l.ImportMode)
	}
	for _, d := range []struct{ key, v string }{{"on-duplicate", l.OnDuplicate}, {"on-duplicate-logical", l.OnDuplicateLogical}} {
		switch strings.ToLower(d.v) {
		case "", "error", "ignore", "replace":
		default:
			add("%s.%s %q must be error, ignore or replace", where, d.key, d.v)
		}
	}
	if l.OnDuplicate != "" && l.OnDuplicateLogical != "" && !strings.EqualFold(l.OnDuplicate, l.OnDuplicateLogical) {
		add("%s.on-duplicate %q and on-duplicate-logical %q differ: set one", where, l.OnDuplicate, l.OnDuplicateLogical)
	}
	if ns == nil {
		return
	}
	const physical = "it configures TiDB Lightning's physical import; the load here is logical"
	isOneOf := func(v string, defaults ...string) bool {
		return v == "" || slices.Contains(defaults, strings.ToLower(v))
	}
	ns.because(where+".on-duplicate-physical", isOneOf(l.OnDuplicatePhysical, "none"), physical)
	ns.because(where+".checksum-physical", isOneOf(l.ChecksumPhysical, "required"), physical)
	ns.because(where+".analyze", isOneOf(l.Analyze, "optional"), physical)
	// DM's defaults, as its task template writes them: the sorting dir is dir's, the quota 0 (none).
	ns.because(where+".sorting-dir-physical", l.SortingDirPhysical == "" || l.SortingDirPhysical == l.Dir, physical)
	quota := strings.TrimSpace(fmt.Sprint(l.DiskQuotaPhysical))
	ns.because(where+".disk-quota-physical", l.DiskQuotaPhysical == nil || quota == "" || quota == "0", physical)
	ns.because(where+".range-concurrency", l.RangeConcurrency == 0, physical)
	ns.because(where+".compress-kv-pairs", l.CompressKVPairs == "", physical)
	ns.because(where+".pd-addr", l.PDAddr == "", physical)
}

// Syncer is a syncers entry.
type Syncer struct {
	WorkerCount       int    `yaml:"worker-count"`
	Batch             int    `yaml:"batch"`
	QueueSize         int    `yaml:"queue-size"`
	CheckpointFlushIn int    `yaml:"checkpoint-flush-interval"`
	Compact           bool   `yaml:"compact"`
	MultipleRows      bool   `yaml:"multiple-rows"`
	SafeMode          bool   `yaml:"safe-mode"`
	SafeModeDuration  string `yaml:"safe-mode-duration"`
	EnableANSIQuotes  bool   `yaml:"enable-ansi-quotes"`
	// SpreadHotTables (Tributary's, not DM's) spreads a hot table's changes over the worker-count
	// connections by primary key (worker/lanes.go). Off by default: where the downstream has no idle
	// cores it costs more than it gains.
	SpreadHotTables bool `yaml:"spread-hot-tables"`
}

// Task is a DM task file.
type Task struct {
	Name                string                `yaml:"name"`
	TaskMode            string                `yaml:"task-mode"`
	ShardMode           string                `yaml:"shard-mode"`
	IsSharding          bool                  `yaml:"is-sharding"`
	MetaSchema          string                `yaml:"meta-schema"`
	CaseSensitive       bool                  `yaml:"case-sensitive"`
	OnlineDDL           bool                  `yaml:"online-ddl"`
	OnlineDDLScheme     string                `yaml:"online-ddl-scheme"`
	ShadowTableRules    []string              `yaml:"shadow-table-rules"`
	TrashTableRules     []string              `yaml:"trash-table-rules"`
	CleanDumpFile       bool                  `yaml:"clean-dump-file"` // accepted, no effect: the load streams, there are no dump files
	CollationCompatible string                `yaml:"collation_compatible"`
	Timezone            string                `yaml:"timezone"`
	IgnoreCheckingItems []string              `yaml:"ignore-checking-items"`
	TargetDatabase      Database              `yaml:"target-database"`
	MySQLInstances      []Instance            `yaml:"mysql-instances"`
	BlockAllowList      map[string]BAList     `yaml:"block-allow-list"`
	BWList              map[string]BAList     `yaml:"black-white-list"`
	Routes              map[string]RouteRule  `yaml:"routes"`
	Syncers             map[string]Syncer     `yaml:"syncers"`
	Filters             map[string]FilterRule `yaml:"filters"`
	ExpressionFilter    map[string]any        `yaml:"expression-filter"`
	ColumnMappings      map[string]any        `yaml:"column-mappings"`
	Mydumpers           map[string]Mydumper   `yaml:"mydumpers"`
	Loaders             map[string]Loader     `yaml:"loaders"`
	Validators          map[string]any        `yaml:"validators"`
}

var taskNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ParseTask reads and checks a task file's content; file names it in errors. Rule and config names must
// exist, source IDs must be unique, and the task must be pessimistic. The keys of mydumpers and loaders
// (and the inline mydumper and loader of an instance) that Tributary refuses are refused only when the
// task dumps (task-mode all or full): an incremental task never uses them, as in DM.
func ParseTask(file string, data []byte) (*Task, error) {
	var t Task
	if err := decodeStrict(file, data, &t); err != nil {
		return nil, err
	}
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(file+": "+format, args...)) }
	if !taskNamePattern.MatchString(t.Name) {
		add("name %q must be 1-64 letters, digits, '_', '-' or '.'", t.Name)
	}
	switch t.TaskMode {
	case "incremental", "all", "full":
	default:
		add("task-mode %q must be all, full or incremental", t.TaskMode)
	}
	// dumpNS collects the refused dump and load keys; nil (value errors only) when the task does not dump.
	var dumpNS *notSupported
	if t.Dumps() {
		dumpNS = &notSupported{file: file}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Mydumpers)) {
		m := t.Mydumpers[name]
		m.validate("mydumpers."+name, add, dumpNS)
	}
	for _, name := range slices.Sorted(maps.Keys(t.Loaders)) {
		l := t.Loaders[name]
		l.validate("loaders."+name, add, dumpNS)
	}
	switch t.ShardMode {
	case "pessimistic":
	case "":
		if t.IsSharding {
			t.ShardMode = "pessimistic" // DM's old is-sharding: true
		}
	case "optimistic":
		add("shard-mode optimistic is not supported yet: use pessimistic")
	default:
		add("shard-mode %q must be pessimistic", t.ShardMode)
	}
	if t.MetaSchema == "" {
		t.MetaSchema = "dm_meta"
	}
	errs = append(errs, t.TargetDatabase.validate(file, "target-database")...)
	if len(t.BWList) > 0 {
		if len(t.BlockAllowList) > 0 {
			add("block-allow-list and its old name black-white-list are both set")
		}
		t.BlockAllowList = t.BWList
	}
	if len(t.MySQLInstances) == 0 {
		add("mysql-instances is empty")
	}
	seen := map[string]bool{}
	for i, inst := range t.MySQLInstances {
		where := fmt.Sprintf("mysql-instances[%d]", i)
		if inst.SourceID == "" {
			add("%s.source-id is empty", where)
		} else if seen[inst.SourceID] {
			add("%s.source-id %q appears twice", where, inst.SourceID)
		}
		seen[inst.SourceID] = true
		if inst.BWList != "" {
			inst.BlockAllowList = inst.BWList
			t.MySQLInstances[i] = inst
		}
		if inst.BlockAllowList != "" {
			if _, ok := t.BlockAllowList[inst.BlockAllowList]; !ok {
				add("%s.block-allow-list %q is not defined in block-allow-list", where, inst.BlockAllowList)
			}
		}
		for _, r := range inst.RouteRules {
			if _, ok := t.Routes[r]; !ok {
				add("%s.route-rules: %q is not defined in routes", where, r)
			}
		}
		if inst.SyncerConfigName != "" {
			if _, ok := t.Syncers[inst.SyncerConfigName]; !ok {
				add("%s.syncer-config-name %q is not defined in syncers", where, inst.SyncerConfigName)
			}
		}
		if inst.MydumperConfigName != "" {
			if _, ok := t.Mydumpers[inst.MydumperConfigName]; !ok {
				add("%s.mydumper-config-name %q is not defined in mydumpers", where, inst.MydumperConfigName)
			}
		}
		if inst.LoaderConfigName != "" {
			if _, ok := t.Loaders[inst.LoaderConfigName]; !ok {
				add("%s.loader-config-name %q is not defined in loaders", where, inst.LoaderConfigName)
			}
		}
		if inst.Mydumper != nil {
			inst.Mydumper.validate(where+".mydumper", add, dumpNS)
		}
		if inst.Loader != nil {
			inst.Loader.validate(where+".loader", add, dumpNS)
		}
		if inst.MydumperThread < 0 {
			add("%s.mydumper-thread %d is negative", where, inst.MydumperThread)
		}
		if inst.LoaderThread < 0 {
			add("%s.loader-thread %d is negative", where, inst.LoaderThread)
		}
		if inst.Meta != nil && inst.Meta.BinlogPos > 0 && inst.Meta.BinlogName == "" {
			add("%s.meta.binlog-pos needs binlog-name", where)
		}
		ns := notSupported{file: file}
		for _, r := range inst.FilterRules {
			if _, ok := t.Filters[r]; !ok {
				add("%s.filter-rules: %q is not defined in filters", where, r)
			}
		}
		ns.check(where+".expression-filters", len(inst.ExpressionFilters) == 0)
		ns.check(where+".column-mapping-rules", len(inst.ColumnMappingRules) == 0)
		errs = append(errs, ns.err())
	}
	t.validateRules(add)
	ns := notSupported{file: file}
	ns.check("case-sensitive", !t.CaseSensitive)
	switch t.OnlineDDLScheme {
	case "", "gh-ost", "pt":
	default:
		add("online-ddl-scheme %q must be gh-ost or pt (or use online-ddl: true, which recognises both)", t.OnlineDDLScheme)
	}
	for _, rules := range []struct {
		key   string
		list  []string
		group bool
	}{{"shadow-table-rules", t.ShadowTableRules, true}, {"trash-table-rules", t.TrashTableRules, false}} {
		for i, r := range rules.list {
			re, err := regexp.Compile(r)
			switch {
			case err != nil:
				add("%s[%d] %q: %v", rules.key, i, r, err)
			case rules.group && re.NumSubexp() < 1:
				add("%s[%d] %q needs a group that captures the real table's name, as in ^_(.+)_gho$", rules.key, i, r)
			}
		}
		if len(rules.list) > 0 && !t.OnlineDDLEnabled() {
			add("%s is set but online-ddl is not true", rules.key)
		}
	}
	ns.check("expression-filter", len(t.ExpressionFilter) == 0)
	ns.check("column-mappings", len(t.ColumnMappings) == 0)
	for _, name := range slices.Sorted(maps.Keys(t.Validators)) {
		// DM's default is no validation (mode none): such an entry means nothing to do here.
		mode := "none"
		if v, ok := t.Validators[name].(map[string]any); ok && v["mode"] != nil {
			mode = strings.ToLower(fmt.Sprint(v["mode"]))
		}
		ns.check("validators."+name+".mode "+mode, mode == "none")
	}
	for i, inst := range t.MySQLInstances {
		if n := inst.ValidatorConfigName; n != "" {
			if _, ok := t.Validators[n]; !ok {
				add("mysql-instances[%d].validator-config-name: %q is not defined in validators", i, n)
			}
		}
	}
	for name, s := range t.Syncers {
		ns.check("syncers."+name+".compact", !s.Compact)
		if s.SafeModeDuration != "" {
			if d, err := time.ParseDuration(s.SafeModeDuration); err != nil || d < 0 {
				add("syncers.%s.safe-mode-duration %q is not a duration like 60s", name, s.SafeModeDuration)
			}
		}
	}
	for i, inst := range t.MySQLInstances {
		if inst.Syncer != nil && inst.Syncer.SafeModeDuration != "" {
			if d, err := time.ParseDuration(inst.Syncer.SafeModeDuration); err != nil || d < 0 {
				add("mysql-instances[%d].syncer.safe-mode-duration %q is not a duration like 60s", i, inst.Syncer.SafeModeDuration)
			}
		}
	}
	errs = append(errs, ns.err())
	if dumpNS != nil {
		errs = append(errs, dumpNS.err())
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &t, nil
}

// OnlineDDLEnabled reports whether ghost and trash tables of online schema change tools are recognised
// (online-ddl: true, or DM's older online-ddl-scheme).
func (t *Task) OnlineDDLEnabled() bool { return t.OnlineDDL || t.OnlineDDLScheme != "" }

// OnlineDDLRules are the shadow and trash table rules (empty: the defaults, which recognise gh-ost and
// pt-osc; online-ddl-scheme narrows them to its tool).
func (t *Task) OnlineDDLRules() (shadow, trash []string) {
	if len(t.ShadowTableRules) > 0 || len(t.TrashTableRules) > 0 {
		return t.ShadowTableRules, t.TrashTableRules
	}
	switch t.OnlineDDLScheme {
	case "gh-ost":
		return []string{`^_(.+)_gho$`}, []string{`^_(.+)_(?:ghc|del)$`}
	case "pt":
		return []string{`^_(.+)_new$`}, []string{`^_(.+)_old$`}
	}
	return nil, nil
}

// Dumps reports whether the task starts with a full load (dump and load): task-mode all or full.
func (t *Task) Dumps() bool { return t.TaskMode == "all" || t.TaskMode == "full" }

// Syncs reports whether the task replicates the binlog: task-mode all (after the load) or incremental.
func (t *Task) Syncs() bool { return t.TaskMode == "all" || t.TaskMode == "incremental" }

// validatePattern checks a DM pattern: wildcards always compile; a ~regex must.
func validatePattern(p string) error {
	if re, ok := strings.CutPrefix(p, "~"); ok {
		if _, err := regexp.Compile(re); err != nil {
			return fmt.Errorf("pattern %q: %w", p, err)
		}
	}
	return nil
}

// validateFilter checks one binlog event filter rule; f.Name names it in the messages.
func validateFilter(f FilterRule, add func(string, ...any)) {
	if f.SchemaPattern == "" {
		add("%s: schema-pattern is empty", f.Name)
	}
	for _, p := range []string{f.SchemaPattern, f.TablePattern} {
		if err := validatePattern(p); err != nil {
			add("%s: %v", f.Name, err)
		}
	}
	switch strings.ToLower(f.Action) {
	case "ignore", "do", "error":
	default:
		add("%s: action %q must be Ignore, Do or Error", f.Name, f.Action)
	}
	for _, e := range f.Events {
		if !slices.Contains(FilterEvents, strings.ToLower(strings.TrimSpace(e))) {
			add("%s: unknown event %q (known: %s)", f.Name, e, strings.Join(FilterEvents, ", "))
		}
	}
	for _, p := range f.SQLPattern {
		if _, err := regexp.Compile("(?i)" + p); err != nil {
			add("%s: sql-pattern %q: %v", f.Name, p, err)
		}
	}
	if len(f.Events) == 0 && len(f.SQLPattern) == 0 {
		add("%s: needs events or sql-pattern", f.Name)
	}
}

// MergeFilters is the binlog event filter of a task on a source, as DM builds it: the task's rules,
// then the source file's, except a source rule for the same schema and table patterns as a task rule
// (the task's wins). skipped lists the source rules left out.
func MergeFilters(task, source []FilterRule) (rules []FilterRule, skipped []FilterRule) {
	rules = slices.Clone(task)
	for _, sr := range source {
		dup := slices.ContainsFunc(task, func(tr FilterRule) bool {
			return strings.EqualFold(tr.SchemaPattern, sr.SchemaPattern) && strings.EqualFold(tr.TablePattern, sr.TablePattern)
		})
		if dup {
			skipped = append(skipped, sr)
			continue
		}
		rules = append(rules, sr)
	}
	return rules, skipped
}

func (t *Task) validateRules(add func(string, ...any)) {
	for name, f := range t.Filters {
		f.Name = "filters " + name
		validateFilter(f, add)
	}
	for name, ba := range t.BlockAllowList {
		for _, p := range append(append([]string{}, ba.DoDBs...), ba.IgnoreDBs...) {
			if err := validatePattern(p); err != nil {
				add("block-allow-list %s: %v", name, err)
			}
		}
		for _, tr := range append(append([]TableRef{}, ba.DoTables...), ba.IgnoreTables...) {
			for _, p := range []string{tr.DBName, tr.TblName} {
				if err := validatePattern(p); err != nil {
					add("block-allow-list %s: %v", name, err)
				}
			}
		}
	}
	for name, r := range t.Routes {
		switch {
		case r.SchemaPattern == "":
			add("routes %s: schema-pattern is empty", name)
		case r.TargetSchema == "":
			add("routes %s: target-schema is empty", name)
		case r.TablePattern == "" && r.TargetTable != "":
			add("routes %s: target-table needs a table-pattern", name)
		}
		for _, p := range []string{r.SchemaPattern, r.TablePattern} {
			if err := validatePattern(p); err != nil {
				add("routes %s: %v", name, err)
			}
		}
	}
}

// Rules returns the block-allow-list (nil: everything) and the route rules of one instance.
func (t *Task) Rules(inst Instance) (*BAList, []RouteRule) {
	var ba *BAList
	if b, ok := t.BlockAllowList[inst.BlockAllowList]; ok {
		ba = &b
	}
	var rules []RouteRule
	for _, name := range inst.RouteRules {
		if r, ok := t.Routes[name]; ok {
			rules = append(rules, r)
		}
	}
	return ba, rules
}

// SourceIDs returns the source IDs of the task's mysql-instances, in their order.
func (t *Task) SourceIDs() []string {
	out := make([]string, 0, len(t.MySQLInstances))
	for _, inst := range t.MySQLInstances {
		out = append(out, inst.SourceID)
	}
	return out
}

// FilterRulesOf returns the binlog event filter rules of an instance, in its filter-rules order.
func (t *Task) FilterRulesOf(inst Instance) []FilterRule {
	var out []FilterRule
	for _, name := range inst.FilterRules {
		if r, ok := t.Filters[name]; ok {
			r.Name = name
			out = append(out, r)
		}
	}
	return out
}

// SyncerOf returns the syncer settings of an instance, with DM's defaults (worker-count 16, batch 100
// in DM; here worker-count 4 and batch 1024 unless set).
func (t *Task) SyncerOf(inst Instance) Syncer {
	s := Syncer{WorkerCount: 4, Batch: 1024}
	cfg := inst.Syncer
	if cfg == nil {
		if c, ok := t.Syncers[inst.SyncerConfigName]; ok {
			cfg = &c
		}
	}
	if cfg != nil {
		if cfg.WorkerCount > 0 {
			s.WorkerCount = cfg.WorkerCount
		}
		if cfg.Batch > 0 {
			s.Batch = cfg.Batch
		}
		s.SafeMode, s.SafeModeDuration = cfg.SafeMode, cfg.SafeModeDuration
		s.SpreadHotTables = cfg.SpreadHotTables
	}
	return s
}

// SafeModeFor is how long safe mode lasts after a start of the sync unit (validated by LoadTask):
// 0 for none. safe-mode: true is all the time and is SafeMode itself.
func (s Syncer) SafeModeFor() time.Duration {
	d, _ := time.ParseDuration(s.SafeModeDuration)
	return max(d, 0)
}

// DumpConfig is what the load unit uses from mydumpers.
type DumpConfig struct {
	Threads         int // tables dumped at the same time
	Rows            int // rows per chunk; 0: derived from ChunkFileSizeMB
	ChunkFileSizeMB int // size of a chunk
}

// LoadConfig is what the load unit uses from loaders.
type LoadConfig struct {
	PoolSize    int    // downstream connections of the load
	OnDuplicate string // "error", "ignore" or "replace"
}

// DumpOf returns the dump settings of an instance: its inline mydumper, or else its
// mydumper-config-name entry, over the defaults (threads 4, rows 0, chunk-filesize 64 as in DM);
// mydumper-thread overrides threads. skip-tz-utc, extra-args and mydumper-path change nothing (the
// last two are refused by ParseTask when the task dumps).
func (t *Task) DumpOf(inst Instance) DumpConfig {
	d := DumpConfig{Threads: 4, ChunkFileSizeMB: 64}
	cfg := inst.Mydumper
	if cfg == nil {
		if c, ok := t.Mydumpers[inst.MydumperConfigName]; ok {
			cfg = &c
		}
	}
	if cfg != nil {
		if cfg.Threads > 0 {
			d.Threads = cfg.Threads
		}
		if cfg.Rows > 0 {
			d.Rows = cfg.Rows
		}
		if mb, err := cfg.ChunkFilesize.Megabytes(); err == nil && mb > 0 {
			d.ChunkFileSizeMB = mb
		}
	}
	if inst.MydumperThread > 0 {
		d.Threads = inst.MydumperThread
	}
	return d
}

// LoadOf returns the load settings of an instance: its inline loader, or else its loader-config-name
// entry, over the defaults (pool-size 4, on-duplicate error); loader-thread overrides pool-size.
//
// Tributary's default on-duplicate is "error" where DM's logical import defaults to replace: rows of two
// shards with the same key, merged into one table, are reported instead of one silently hiding the other.
// The task's clean-dump-file and a loader's dir are accepted and have no effect: the load streams the
// dump, there are no dump files.
func (t *Task) LoadOf(inst Instance) LoadConfig {
	l := LoadConfig{PoolSize: 4, OnDuplicate: "error"}
	cfg := inst.Loader
	if cfg == nil {
		if c, ok := t.Loaders[inst.LoaderConfigName]; ok {
			cfg = &c
		}
	}
	if cfg != nil {
		if cfg.PoolSize > 0 {
			l.PoolSize = cfg.PoolSize
		}
		if od := cfg.onDuplicate(); od != "" {
			l.OnDuplicate = od
		}
	}
	if inst.LoaderThread > 0 {
		l.PoolSize = inst.LoaderThread
	}
	return l
}

// LoadTask reads a task file.
func LoadTask(path string) (*Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseTask(path, data)
}

// LoadSource reads a source file.
func LoadSource(path string) (*Source, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSource(path, data)
}
