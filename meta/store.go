package meta

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// Checkpoint is what the downstream holds for one source: the position to resume reading from, and
// per upstream table the position up to which its changes are applied.
type Checkpoint struct {
	Global     vocab.Position
	GlobalGTID string // the GTID set at Global (GTID mode)
	Tables     map[vocab.TableName]vocab.Position
	// Resolved is, per upstream shard table, the position of its last sharding DDL resolved downstream
	// (executed or skipped). It is kept apart from Tables: a table's DML before that DDL may still be
	// waiting to be re-read.
	Resolved map[vocab.TableName]vocab.Position
	// ResolvedDDLs, per target, the DDLs of the last lock this source applied (exec or skip), so a
	// restarted worker can finish an operation whose done it did not write.
	ResolvedDDLs map[vocab.TableName][]string
	// Schemas, per upstream table, the tracked column versions (JSON) for binlogs without names.
	Schemas map[vocab.TableName]string
	// Online, per real upstream table, the online schema change tool's run in progress (JSON of
	// package onlineddl).
	Online map[vocab.TableName]string
	// Lanes, per upstream table, the positions of the table's key lanes (see Lane).
	Lanes map[vocab.TableName][]Lane
}

// Lane says that the rows of an upstream table whose key falls in lane Index of N, up to Pos, are
// applied. A table whose rows one flush commits on several connections (by key) gets one per
// connection instead of its table position, which a later transaction then moves past them all; a
// row is applied when its table position or its lane's position is at or past its event. Cols are the
// key columns the lane was computed over, so a lane reads the same after the key changes. Chunk 0:
// the lane is the hash of the key's values mod N; Chunk > 0: the key is one integer column, and its
// value / Chunk mod N is the lane (runs of Chunk consecutive keys share one).
type Lane struct {
	N, Index int
	Chunk    int
	Cols     []string
	Pos      vocab.Position
}

// CheckpointUpdate is the checkpoint part of one downstream transaction.
type CheckpointUpdate struct {
	Global     vocab.Position
	GlobalGTID string
	Tables     map[vocab.TableName]vocab.Position
	Resolved   map[vocab.TableName]vocab.Position
	Schemas    map[vocab.TableName]string // tracked column versions (JSON) of changed tables
	Online     map[vocab.TableName]string // online DDL tool runs of changed tables ("" when over)
	Lanes      map[vocab.TableName][]Lane
	// ResolvedTarget records a lock's DDLs for its target (optional).
	ResolvedTarget *vocab.TableName
	ResolvedDDLs   []string
}

// Row ids of the checkpoint table. Table rows have JSON ids, so none can collide.
const (
	// EpochID is the row holding (in binlog_pos) the epoch of the binding that owns the source's
	// checkpoint.
	EpochID = "epoch"
	// GlobalID is the row of the position to resume reading from.
	GlobalID = ""
)

var epochHash = Hash(EpochID)

// ErrFenced means a newer binding of the source owns its checkpoint: this worker's binding was taken
// away, and nothing it writes may commit.
var ErrFenced = errors.New("the source is bound to another worker now (checkpoint fenced by a newer binding epoch)")

// Store reads and writes one source's rows of a task's meta tables.
type Store struct {
	db             *sql.DB
	schema, task   string
	source         string
	ckpt, marker   vocab.TableName
	ckptQ, markerQ string // quoted names
	epoch          int64  // binding epoch fencing the checkpoint (0: no fencing)
}

// NewStore returns the store of one source of a task.
func NewStore(db *sql.DB, schema, task, source string) *Store {
	s := newStore(db, CheckpointTable(schema, task), MarkerTable(schema, task), source)
	s.schema, s.task = schema, task
	return s
}

func newStore(db *sql.DB, ckpt, marker vocab.TableName, source string) *Store {
	return &Store{db: db, source: source, ckpt: ckpt, marker: marker, ckptQ: ckpt.String(), markerQ: marker.String()}
}

// CheckpointTable is the store's checkpoint table.
func (s *Store) CheckpointTable() vocab.TableName { return s.ckpt }

// SetEpoch makes every transaction check that the source's checkpoint belongs to the binding of this
// epoch (Init claims it).
func (s *Store) SetEpoch(epoch int64) { s.epoch = epoch }

// Init creates (or migrates) the task's meta tables and claims the checkpoint for the store's epoch.
func (s *Store) Init(ctx context.Context) error {
	if err := Init(ctx, s.db, s.schema, s.task); err != nil {
		return err
	}
	return s.ClaimEpoch(ctx)
}

// ClaimEpoch records the store's epoch as the owner of the checkpoint unless a newer one did; it
// waits for the transactions of an older owner in flight (they hold the row in share mode).
func (s *Store) ClaimEpoch(ctx context.Context) error {
	if s.epoch == 0 {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, "INSERT INTO "+s.ckptQ+" (source, id_hash, id, binlog_pos) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE binlog_pos = GREATEST(binlog_pos, VALUES(binlog_pos))",
		s.source, epochHash, EpochID, s.epoch); err != nil {
		return fmt.Errorf("claim checkpoint of %s: %w", s.source, err)
	}
	return s.CheckEpoch(ctx, s.db, false)
}

// Queryer is a *sql.DB, *sql.Conn or *sql.Tx.
type Queryer interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// Execer is a *sql.DB, *sql.Conn or *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// CheckEpoch fails with ErrFenced when a newer binding owns the checkpoint. Inside a transaction,
// share says to read the owner row LOCK IN SHARE MODE: a newer owner's claim then waits for the
// transaction to end, and the transaction sees a claim committed before it.
func (s *Store) CheckEpoch(ctx context.Context, q Queryer, share bool) error {
	if s.epoch == 0 {
		return nil
	}
	lock := ""
	if share {
		lock = " LOCK IN SHARE MODE"
	}
	return s.ScanOwner(q.QueryRowContext(ctx, s.EpochSQL()+lock).Scan)
}

// EpochSQL is the query CheckEpoch reads the checkpoint's owning epoch with, its values in it as
// literals (a statement of a multi-statement query); "" when this store has no epoch to check.
func (s *Store) EpochSQL() string {
	if s.epoch == 0 {
		return ""
	}
	return "SELECT binlog_pos FROM " + s.ckptQ + " WHERE source = " + hexText(s.source) + " AND id_hash = '" + epochHash + "'"
}

// ScanOwner reads the row of EpochSQL with scan and fails as CheckEpoch does.
func (s *Store) ScanOwner(scan func(dest ...any) error) error {
	var owner int64
	if err := scan(&owner); err != nil {
		return fmt.Errorf("read checkpoint owner of %s: %w", s.source, err)
	}
	if owner > s.epoch {
		return fmt.Errorf("source %s, binding epoch %d (checkpoint owned by epoch %d): %w", s.source, s.epoch, owner, ErrFenced)
	}
	return nil
}

// Load reads the source's checkpoint (zero positions when there is none).
func (s *Store) Load(ctx context.Context) (Checkpoint, error) {
	cp := Checkpoint{Tables: map[vocab.TableName]vocab.Position{}, Resolved: map[vocab.TableName]vocab.Position{},
		ResolvedDDLs: map[vocab.TableName][]string{}, Schemas: map[vocab.TableName]string{}, Online: map[vocab.TableName]string{}, Lanes: map[vocab.TableName][]Lane{}}
	rows, err := s.db.QueryContext(ctx, "SELECT id, binlog_name, binlog_pos, binlog_gtid, ddls FROM "+s.ckptQ+" WHERE source = ?", s.source)
	if err != nil {
		return cp, fmt.Errorf("load checkpoint of %s from %s: %w", s.source, s.ckpt, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		var pos uint32
		var gtid, ddls sql.NullString
		if err := rows.Scan(&id, &name, &pos, &gtid, &ddls); err != nil {
			return cp, err
		}
		p := vocab.Position{File: name, Pos: pos}
		switch {
		case id == EpochID, strings.HasPrefix(id, LoadPrefix):
		case id == GlobalID:
			cp.Global, cp.GlobalGTID = p, gtid.String
		case strings.HasPrefix(id, "schema:"):
			var t vocab.TableName
			if err := json.Unmarshal([]byte(id[len("schema:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Schemas[t] = ddls.String
		case strings.HasPrefix(id, "online:"):
			var t vocab.TableName
			if err := json.Unmarshal([]byte(id[len("online:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			if ddls.String != "" {
				cp.Online[t] = ddls.String
			}
		case strings.HasPrefix(id, lanePrefix):
			t, l, err := parseLaneID(id)
			if err == nil && ddls.Valid {
				err = json.Unmarshal([]byte(ddls.String), &l.Cols)
			}
			if err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			l.Pos = p
			cp.Lanes[t] = append(cp.Lanes[t], l)
		case strings.HasPrefix(id, "resolved:"):
			var t vocab.TableName
			if err := json.Unmarshal([]byte(id[len("resolved:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Resolved[t] = p
		case strings.HasPrefix(id, "ddl:"):
			var t vocab.TableName
			var list []string
			if err := json.Unmarshal([]byte(id[len("ddl:"):]), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			if err := json.Unmarshal([]byte(ddls.String), &list); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.ResolvedDDLs[t] = list
		default:
			var t vocab.TableName
			if err := json.Unmarshal([]byte(id), &t); err != nil {
				return cp, fmt.Errorf("checkpoint row %q: %w", id, err)
			}
			cp.Tables[t] = p
		}
	}
	return cp, rows.Err()
}

// Write writes the checkpoint rows of up with e, normally the transaction of the changes they
// cover.
func (s *Store) Write(ctx context.Context, e Execer, up CheckpointUpdate) error {
	// One multi-row upsert (a few hundred rows a statement): a flush on many connections writes a
	// position for every table and lane it touched, and a statement each cost a round trip each.
	rows := s.checkpointRows(up)
	for _, st := range s.writeSQL(rows) {
		if _, err := e.ExecContext(ctx, st.sql); err != nil {
			return fmt.Errorf("write checkpoint of %s (%d rows, first %s): %w", s.source, st.rows, st.first, err)
		}
	}
	return nil
}

// checkpointRows are the checkpoint rows of up, 7 values each (source, id_hash, id, binlog_name,
// binlog_pos, binlog_gtid, ddls).
func (s *Store) checkpointRows(up CheckpointUpdate) []any {
	var rows []any
	put := func(id string, p vocab.Position, gtid, ddls any) {
		rows = append(rows, s.source, Hash(id), id, p.File, p.Pos, gtid, ddls)
	}
	for t, p := range up.Tables {
		put(tableID("", t), p, nil, nil)
	}
	for t, lanes := range up.Lanes {
		for _, l := range lanes {
			cols, _ := json.Marshal(l.Cols)
			put(laneID(t, l), l.Pos, nil, string(cols))
		}
	}
	for t, js := range up.Schemas {
		put(tableID("schema:", t), vocab.Position{}, nil, js)
	}
	for t, js := range up.Online {
		put(tableID("online:", t), vocab.Position{}, nil, js)
	}
	for t, p := range up.Resolved {
		put(tableID("resolved:", t), p, nil, nil)
	}
	if up.ResolvedTarget != nil {
		ddls, _ := json.Marshal(up.ResolvedDDLs)
		put(tableID("ddl:", *up.ResolvedTarget), vocab.Position{}, nil, string(ddls))
	}
	if !up.Global.IsZero() || up.GlobalGTID != "" {
		put(GlobalID, up.Global, up.GlobalGTID, nil)
	}
	return rows
}

// WriteSQL is what Write runs for up, as statements with their values in them (statements of a
// multi-statement query).
func (s *Store) WriteSQL(up CheckpointUpdate) []string {
	var out []string
	for _, st := range s.writeSQL(s.checkpointRows(up)) {
		out = append(out, st.sql)
	}
	return out
}

type writeStatement struct {
	sql, first string
	rows       int
}

// writeSQL makes the upserts of rows (7 values each), up to 256 rows and about 4 MiB a statement (far
// below max_allowed_packet: tracked schemas can be long), the values written in as literals: strings as
// _utf8mb4 X'...' (their meaning does not depend on the session's character set or sql_mode), positions
// as numbers, nil as NULL.
func (s *Store) writeSQL(rows []any) []writeStatement {
	const cols, perStatement, maxBytes = 7, 256, 4 << 20
	var out []writeStatement
	for len(rows) > 0 {
		n := min(len(rows)/cols, perStatement)
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + s.ckptQ + " (source, id_hash, id, binlog_name, binlog_pos, binlog_gtid, ddls) VALUES ")
		for r := 0; r < n; r++ {
			if r > 0 && sb.Len() > maxBytes {
				n = r
				break
			}
			if r > 0 {
				sb.WriteByte(',')
			}
			sb.WriteByte('(')
			for c, v := range rows[r*cols : (r+1)*cols] {
				if c > 0 {
					sb.WriteByte(',')
				}
				switch x := v.(type) {
				case nil:
					sb.WriteString("NULL")
				case string:
					sb.WriteString(hexText(x))
				case uint32:
					sb.WriteString(strconv.FormatUint(uint64(x), 10))
				default:
					panic(fmt.Sprintf("meta: checkpoint value of type %T", v))
				}
			}
			sb.WriteByte(')')
		}
		sb.WriteString(" ON DUPLICATE KEY UPDATE binlog_name = VALUES(binlog_name), binlog_pos = VALUES(binlog_pos), binlog_gtid = VALUES(binlog_gtid), ddls = VALUES(ddls)")
		out = append(out, writeStatement{sql: sb.String(), first: rows[2].(string), rows: n})
		rows = rows[n*cols:]
	}
	return out
}

// LoadPrefix starts the ids of a source's full-load state rows (package loader): the load's header
// at LoadPrefix itself and one row per copy lane after it. Load skips them.
const LoadPrefix = "load:"

// LoadRow is one row of a source's full-load state.
type LoadRow struct {
	ID   string
	Pos  vocab.Position
	GTID string
	Data string // JSON of the loader
}

// LoadRows reads the source's full-load state rows by id.
func (s *Store) LoadRows(ctx context.Context) (map[string]LoadRow, error) {
	return s.loadRows(ctx, "source = ? AND id LIKE 'load:%'", s.source)
}

// LoadHeaders reads the full-load headers of every source of the task, by source.
func (s *Store) LoadHeaders(ctx context.Context) (map[string]LoadRow, error) {
	return s.loadRows(ctx, "id_hash = ?", Hash(LoadPrefix))
}

func (s *Store) loadRows(ctx context.Context, where string, arg any) (map[string]LoadRow, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT source, id, binlog_name, binlog_pos, binlog_gtid, ddls FROM "+s.ckptQ+" WHERE "+where, arg)
	if err != nil {
		return nil, fmt.Errorf("read load state from %s: %w", s.ckpt, err)
	}
	defer rows.Close()
	out := map[string]LoadRow{}
	for rows.Next() {
		var src string
		var r LoadRow
		var gtid, data sql.NullString
		if err := rows.Scan(&src, &r.ID, &r.Pos.File, &r.Pos.Pos, &gtid, &data); err != nil {
			return nil, err
		}
		r.GTID, r.Data = gtid.String, data.String
		if where == "id_hash = ?" {
			out[src] = r
		} else {
			out[r.ID] = r
		}
	}
	return out, rows.Err()
}

// WriteLoad writes one full-load state row with e (the transaction of the rows it covers).
func (s *Store) WriteLoad(ctx context.Context, e Execer, r LoadRow) error {
	if !strings.HasPrefix(r.ID, LoadPrefix) {
		return fmt.Errorf("load state id %q lacks the prefix %q", r.ID, LoadPrefix)
	}
	_, err := e.ExecContext(ctx, "INSERT INTO "+s.ckptQ+" (source, id_hash, id, binlog_name, binlog_pos, binlog_gtid, ddls) VALUES (?, ?, ?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE "+
		"binlog_name = VALUES(binlog_name), binlog_pos = VALUES(binlog_pos), binlog_gtid = VALUES(binlog_gtid), ddls = VALUES(ddls)",
		s.source, Hash(r.ID), r.ID, r.Pos.File, r.Pos.Pos, r.GTID, r.Data)
	if err != nil {
		return fmt.Errorf("write load state %s/%s: %w", s.source, r.ID, err)
	}
	return nil
}

const lanePrefix = "lane:"

// laneID is "lane:<n>/<index>/<hash of the key columns>:" and the table's JSON (a hashed lane), or
// "lane:<n>/<index>/<hash of the key columns>/<chunk>:" (a chunked lane): one row per lane and key,
// so a lane of the key before a DDL is not overwritten by the lane of the same number after it.
func laneID(t vocab.TableName, l Lane) string {
	cols, _ := json.Marshal(l.Cols)
	if l.Chunk > 0 {
		return tableID(fmt.Sprintf("%s%d/%d/%s/%d:", lanePrefix, l.N, l.Index, Hash(string(cols))[:8], l.Chunk), t)
	}
	return tableID(fmt.Sprintf("%s%d/%d/%s:", lanePrefix, l.N, l.Index, Hash(string(cols))[:8]), t)
}

func parseLaneID(id string) (vocab.TableName, Lane, error) {
	var t vocab.TableName
	var l Lane
	rest, js, ok := strings.Cut(id[len(lanePrefix):], ":")
	if !ok {
		return t, l, errors.New("no table")
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 && len(parts) != 4 {
		return t, l, errors.New("not n/index/key or n/index/key/chunk")
	}
	if _, err := fmt.Sscan(parts[0]+" "+parts[1], &l.N, &l.Index); err != nil || l.N <= 0 || l.Index < 0 || l.Index >= l.N {
		return t, l, fmt.Errorf("lane %q", rest)
	}
	if len(parts) == 4 {
		if _, err := fmt.Sscan(parts[3], &l.Chunk); err != nil || l.Chunk <= 0 {
			return t, l, fmt.Errorf("lane %q: chunk", rest)
		}
	}
	return t, l, json.Unmarshal([]byte(js), &t)
}

func tableID(prefix string, t vocab.TableName) string {
	id, _ := json.Marshal(t)
	return prefix + string(id)
}

// Marker is the state of one DDL of a lock in the marker table.
type Marker struct {
	State         string // "started" (about to run), "running" (MarkRunningSQL) or "done" (ran)
	Before, After string // definitions of the DDL's tables before and after it ran
}

// Marker reads the marker of ddl in lockID (false: none).
func (s *Store) Marker(ctx context.Context, lockID, ddl string) (Marker, bool, error) {
	m, err := ScanMarker(s.db.QueryRowContext(ctx, s.MarkerSQL(lockID, ddl)).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read DDL marker of %s: %w", lockID, err)
	}
	return m, true, nil
}

// MarkerSQL is the query Marker reads with, its values in it as literals (a statement of a
// multi-statement query); ScanMarker reads its row.
func (s *Store) MarkerSQL(lockID, ddl string) string {
	return "SELECT state, before_def, after_def FROM " + s.markerQ + " WHERE lock_hash = '" + Hash(lockID) + "' AND ddl_hash = '" + Hash(ddl) + "'"
}

// ScanMarker reads the row of MarkerSQL.
func ScanMarker(scan func(dest ...any) error) (Marker, error) {
	var m Marker
	var before, after sql.NullString
	if err := scan(&m.State, &before, &after); err != nil {
		return Marker{}, err
	}
	m.Before, m.After = before.String, after.String
	return m, nil
}

// Mark writes the marker of ddl in lockID.
func (s *Store) Mark(ctx context.Context, lockID, ddl string, m Marker) error {
	_, err := s.db.ExecContext(ctx, s.MarkSQL(lockID, ddl, m))
	if err != nil {
		return fmt.Errorf("write DDL marker of %s: %w", lockID, err)
	}
	return nil
}

// MarkSQL is the statement Mark runs, with its values in it as hex literals (their meaning does not
// depend on the session's sql_mode or character set, and the statement holds no "?" or ";" of its
// values): it can go in one round trip with the DDL it marks.
func (s *Store) MarkSQL(lockID, ddl string, m Marker) string {
	return s.markSQL(hexText(Hash(lockID)), lockID, ddl, m)
}

// markSQL is MarkSQL with lockHash, the SQL expression of the marker's lock_hash.
func (s *Store) markSQL(lockHash, lockID, ddl string, m Marker) string {
	return "INSERT INTO " + s.markerQ + " (lock_hash, ddl_hash, lock_id, ddl, state, before_def, after_def, source) VALUES (" +
		strings.Join([]string{lockHash, hexText(Hash(ddl)), hexText(lockID), hexText(ddl), hexText(m.State),
			hexText(m.Before), hexText(m.After), hexText(s.source)}, ", ") + ") " +
		"ON DUPLICATE KEY UPDATE ddl = VALUES(ddl), state = VALUES(state), before_def = VALUES(before_def), after_def = VALUES(after_def), source = VALUES(source)"
}

// MarkRunningSQL is the statement that writes a marker in state "running" (with no definition) for a
// DDL whose run shows on its table and that nobody ran in this round of the lock (see the worker's
// DDLExecutor.ExecDDLFirst), to go in one query before the DDL, which the server then runs only if it
// succeeds. A marker of the same DDL already there is of an earlier round, and is overwritten. When the
// store has an epoch, it fails (1048: a NULL key in a single-row INSERT, an error in every sql_mode)
// unless the checkpoint's owner is this store's epoch or an older one, as CheckEpoch would.
func (s *Store) MarkRunningSQL(lockID, ddl string) string {
	lock := hexText(Hash(lockID))
	if s.epoch != 0 {
		lock = "(SELECT " + lock + " FROM " + s.ckptQ + " WHERE source = " + hexText(s.source) + " AND id_hash = '" + epochHash +
			"' AND binlog_pos <= " + strconv.FormatInt(s.epoch, 10) + ")"
	}
	return s.markSQL(lock, lockID, ddl, Marker{State: MarkerRunning})
}

// MarkerRunning is the state of a marker MarkRunningSQL opened.
const MarkerRunning = "running"

// hexText is a string literal of v's bytes in utf8mb4: _utf8mb4 X'...' (” when empty).
func hexText(v string) string {
	if v == "" {
		return "''"
	}
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(v)) + "'"
}

// LoadGlobal reads only the source's resume position (zero when it has none), for a status of a
// subtask that does not run.
func (s *Store) LoadGlobal(ctx context.Context) (vocab.Position, string, error) {
	var name string
	var pos uint32
	var gtid sql.NullString
	err := s.db.QueryRowContext(ctx, "SELECT binlog_name, binlog_pos, binlog_gtid FROM "+s.ckptQ+" WHERE source = ? AND id_hash = ?", s.source, Hash(GlobalID)).Scan(&name, &pos, &gtid)
	if errors.Is(err, sql.ErrNoRows) {
		return vocab.Position{}, "", nil
	}
	if err != nil {
		return vocab.Position{}, "", fmt.Errorf("load checkpoint of %s from %s: %w", s.source, s.ckpt, err)
	}
	return vocab.Position{File: name, Pos: pos}, gtid.String, nil
}
