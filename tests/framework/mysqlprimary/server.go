package mysqlprimary

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-mysql-org/go-mysql/server"
	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
)

var errDumpClosed = errors.New("dump closed")

// Options are what a test primary is.
type Options struct {
	Version  string // "8.0.36" (default) or "8.4.3"; 8.4 answers no SHOW MASTER STATUS
	ServerID uint32 // default 1
	UUID     uuid.UUID
	User     string // default "root"
	Password string
	// Auth is the default authentication plugin: caching_sha2_password (MySQL 8's default, full
	// authentication over RSA key exchange without TLS) or mysql_native_password (off in 8.4).
	Auth string
	// Metadata is binlog_row_metadata: "MINIMAL" (MySQL's default) or "FULL".
	Metadata   string
	NoChecksum bool // binlog_checksum=NONE
	// Catalog, when set, is a database (a throw-away MariaDB holding the same schemas and tables)
	// that answers what the emulation does not: information_schema's tables, columns and keys, and
	// SELECTs of the user's tables. Its facts are the schema's; its collation names are MariaDB's.
	Catalog *sql.DB
	// Variables override the global variables' values (gtid_mode, binlog_row_value_options, ...).
	Variables map[string]string
	// Grants are SHOW GRANTS's lines (default: what a replication user needs, ON *.*); RoleGrants
	// those of SHOW GRANTS ... USING the active roles; CurrentRole is CURRENT_ROLE() (default NONE).
	Grants, RoleGrants []string
	CurrentRole        string
	// TLS, when set, lets clients connect over TLS (caching_sha2_password's full authentication then
	// sends the password over it instead of the RSA key exchange).
	TLS *tls.Config
}

// Primary is a MySQL-speaking primary for tests: it answers the queries a replication tool sends a
// source and serves its Binlog by file and position (COM_BINLOG_DUMP) and by GTID set
// (COM_BINLOG_DUMP_GTID).
type Primary struct {
	*Binlog
	opts Options
	ln   net.Listener
	conf *server.Server

	mu      sync.Mutex
	creates map[string]string          // "db.t" → SHOW CREATE TABLE's text
	conns   map[chan struct{}]struct{} // each connection's done
	ids     map[uint32]chan struct{}   // connection id → done, for KILL
	queries []string
	unknown []string
	closed  bool
	wg      sync.WaitGroup
}

// Start listens on 127.0.0.1 at a free port and serves until Close.
func Start(opts Options) (*Primary, error) {
	if opts.Version == "" {
		opts.Version = "8.0.36"
	}
	if opts.ServerID == 0 {
		opts.ServerID = 1
	}
	if opts.UUID == (uuid.UUID{}) {
		opts.UUID = uuid.New()
	}
	if opts.User == "" {
		opts.User = "root"
	}
	if opts.Auth == "" {
		opts.Auth = mysql.AUTH_CACHING_SHA2_PASSWORD
	}
	if opts.Metadata == "" {
		opts.Metadata = "MINIMAL"
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := Server{Version: opts.Version, ServerID: opts.ServerID, Checksum: !opts.NoChecksum}
	p := &Primary{
		Binlog:  NewBinlog(srv, opts.UUID),
		opts:    opts,
		ln:      ln,
		conf:    server.NewServer(opts.Version, mysql.DEFAULT_COLLATION_ID, opts.Auth, key, opts.TLS),
		creates: map[string]string{},
		conns:   map[chan struct{}]struct{}{},
		ids:     map[uint32]chan struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the primary's host:port.
func (p *Primary) Addr() string { return p.ln.Addr().String() }

// Port is the primary's port.
func (p *Primary) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// UUID is @@server_uuid.
func (p *Primary) UUID() uuid.UUID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opts.UUID
}

// CreateTable registers a table's SHOW CREATE TABLE text (the text MySQL 8 prints, e.g. with its
// /*!80016 ... */ comments and utf8mb4_0900_ai_ci).
func (p *Primary) CreateTable(schema, table, create string) {
	p.mu.Lock()
	p.creates[schema+"."+table] = create
	p.mu.Unlock()
}

// Queries are the statements the primary has answered, in order; Unknown the ones it did not know
// (answered with an error, as a real server would for a query it cannot run).
func (p *Primary) Queries() (all, unknown []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.queries...), append([]string(nil), p.unknown...)
}

// SwitchPrimary puts another primary with the same GTID history behind the same address, as a
// failover behind a virtual IP does: a new server UUID and server_id, binlog files of another name
// starting from the GTIDs executed so far, and every connection dropped.
func (p *Primary) SwitchPrimary(serverUUID uuid.UUID, serverID uint32, binlogBase string) {
	p.mu.Lock()
	p.opts.UUID, p.opts.ServerID = serverUUID, serverID
	p.mu.Unlock()
	p.Binlog.switchTo(serverUUID, serverID, binlogBase)
	p.DropConnections()
}

// DropConnections closes every connection (binlog dumps and queries), as a network fault or a
// primary restart does; the primary goes on listening.
func (p *Primary) DropConnections() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d := range p.conns {
		close(d)
		delete(p.conns, d)
	}
}

// Close stops listening and closes every connection.
func (p *Primary) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.DropConnections()
	p.wg.Wait()
}

func (p *Primary) accept() {
	defer p.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			return
		}
		conns.Add(1)
		go func() {
			defer conns.Done()
			p.serve(nc)
		}()
	}
}

func (p *Primary) serve(nc net.Conn) {
	defer nc.Close()
	h := &handler{p: p, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.conns[h.done] = struct{}{}
	p.mu.Unlock()
	go func() {
		<-h.done
		nc.Close()
	}()
	defer func() {
		if h.cat != nil {
			h.cat.Close()
		}
		p.mu.Lock()
		if _, ok := p.conns[h.done]; ok {
			close(h.done)
			delete(p.conns, h.done)
		}
		p.mu.Unlock()
	}()
	c, err := p.conf.NewConn(nc, p.opts.User, p.opts.Password, h)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.ids[c.ConnectionID()] = h.done
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.ids, c.ConnectionID())
		p.mu.Unlock()
	}()
	for !c.Closed() {
		if err := c.HandleCommand(); err != nil {
			return
		}
	}
}

// handler answers one connection.
type handler struct {
	server.EmptyReplicationHandler
	p    *Primary
	done chan struct{}
	cat  *sql.Conn // the connection's session on the catalog, once it needs one
}

var (
	intWidth     = regexp.MustCompile(`^(tinyint|smallint|mediumint|int|bigint)\(\d+\)`)
	reShowCreate = regexp.MustCompile("(?i)^SHOW CREATE TABLE `?([^`.]+)`?\\.`?([^`]+)`?$")
	reSelectVars = regexp.MustCompile(`(?i)^SELECT\s+(@@[\w.]+(\s*,\s*@@[\w.]+)*)\s*$`)
	reShowVars   = regexp.MustCompile(`(?i)^SHOW (GLOBAL |SESSION )?VARIABLES LIKE '([^']+)'$`)
)

func (h *handler) UseDB(db string) error {
	if h.p.opts.Catalog == nil {
		return nil
	}
	conn, err := h.catalog()
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(context.Background(), "USE `"+strings.ReplaceAll(db, "`", "``")+"`")
	return err
}

// catalog is the connection's own session on the catalog database.
func (h *handler) catalog() (*sql.Conn, error) {
	if h.cat == nil {
		conn, err := h.p.opts.Catalog.Conn(context.Background())
		if err != nil {
			return nil, err
		}
		h.cat = conn
	}
	return h.cat, nil
}

// forward answers q from the catalog, every value as text (what the text protocol sends anyway).
func (h *handler) forward(q string) (*mysql.Result, error) {
	conn, err := h.catalog()
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(context.Background(), q)
	if err != nil {
		var me *gomysql.MySQLError
		if errors.As(err, &me) {
			return nil, mysql.NewError(me.Number, me.Message)
		}
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]any, len(cols))
		for i, v := range vals {
			if v.Valid {
				row[i] = v.String
				if strings.EqualFold(cols[i], "COLUMN_TYPE") && !strings.Contains(v.String, "zerofill") {
					// MySQL 8.0.17+ writes integer types without their display width (the catalog,
					// MariaDB, writes int(11))
					row[i] = intWidth.ReplaceAllString(v.String, "$1")
				}
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, nil
	}
	return results(cols, out)
}

// HandleQuery answers what Tributary and go-mysql send a source. What MySQL 8.0/8.4 answers follows
// the reference manual's pages of each statement (SHOW BINARY LOG STATUS, SHOW BINARY LOGS, SHOW
// REPLICAS) and of each variable.
func (h *handler) HandleQuery(q string) (*mysql.Result, error) {
	p := h.p
	q = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(q), ";"))
	p.mu.Lock()
	p.queries = append(p.queries, q)
	p.mu.Unlock()
	upper := strings.ToUpper(q)
	switch {
	case strings.HasPrefix(upper, "SET "), upper == "BEGIN", upper == "COMMIT", upper == "ROLLBACK",
		strings.HasPrefix(upper, "START TRANSACTION"):
		return nil, nil
	case strings.HasPrefix(upper, "KILL "):
		var id uint32
		if _, err := fmt.Sscanf(strings.TrimPrefix(strings.TrimPrefix(upper, "KILL "), "CONNECTION "), "%d", &id); err != nil {
			return nil, mysql.NewError(mysql.ER_PARSE_ERROR, "KILL needs a connection id: "+q)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		done, ok := p.ids[id]
		if !ok {
			return nil, mysql.NewError(mysql.ER_NO_SUCH_THREAD, fmt.Sprintf("Unknown thread id: %d", id))
		}
		if _, open := p.conns[done]; open {
			close(done)
			delete(p.conns, done)
		}
		return nil, nil
	case upper == "SHOW MASTER STATUS" && p.is84():
		// removed in 8.4 (8.2 deprecated it)
		return nil, mysql.NewError(mysql.ER_PARSE_ERROR, "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version for the right syntax to use near 'MASTER STATUS' at line 1")
	case upper == "SHOW MASTER STATUS", upper == "SHOW BINARY LOG STATUS":
		pos, gtids := p.Status()
		return result([]string{"File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"},
			[]any{pos.Name, uint64(pos.Pos), "", "", gtids})
	case upper == "SHOW BINARY LOGS", upper == "SHOW MASTER LOGS":
		var rows [][]any
		for _, f := range p.Files() {
			rows = append(rows, []any{f.Name, uint64(f.Pos), "No"})
		}
		return results([]string{"Log_name", "File_size", "Encrypted"}, rows)
	case strings.HasPrefix(upper, "SHOW GRANTS") && strings.Contains(upper, " USING "):
		return grantRows(p.opts.User, p.opts.RoleGrants)
	case upper == "SHOW GRANTS", strings.HasPrefix(upper, "SHOW GRANTS FOR"):
		grants := p.opts.Grants
		if grants == nil {
			grants = []string{"GRANT SELECT, RELOAD, PROCESS, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `" + p.opts.User + "`@`%`"}
		}
		return grantRows(p.opts.User, grants)
	case upper == "SELECT CURRENT_ROLE()":
		return result([]string{"CURRENT_ROLE()"}, []any{cmpOr(p.opts.CurrentRole, "NONE")})
	}
	if m := reShowVars.FindStringSubmatch(q); m != nil {
		name := strings.ToLower(m[2])
		if v, ok := p.variable(name); ok {
			return result([]string{"Variable_name", "Value"}, []any{name, v})
		}
		return results([]string{"Variable_name", "Value"}, nil)
	}
	if m := reSelectVars.FindStringSubmatch(q); m != nil {
		var names []string
		var vals []any
		for _, v := range strings.Split(m[1], ",") {
			v = strings.TrimSpace(v)
			name := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(strings.ToLower(v), "@@"), "global."), "session.")
			val, ok := p.variable(name)
			if !ok {
				return nil, mysql.NewError(mysql.ER_UNKNOWN_SYSTEM_VARIABLE, fmt.Sprintf("Unknown system variable '%s'", name))
			}
			names = append(names, v)
			vals = append(vals, val)
		}
		return result(names, vals)
	}
	if upper == "SELECT VERSION()" {
		return result([]string{"VERSION()"}, []any{p.opts.Version})
	}
	if m := reShowCreate.FindStringSubmatch(q); m != nil {
		p.mu.Lock()
		create, ok := p.creates[m[1]+"."+m[2]]
		p.mu.Unlock()
		if !ok && p.opts.Catalog != nil {
			return h.forward(q)
		}
		if !ok {
			return nil, mysql.NewError(mysql.ER_NO_SUCH_TABLE, fmt.Sprintf("Table '%s.%s' doesn't exist", m[1], m[2]))
		}
		return result([]string{"Table", "Create Table"}, []any{m[2], create})
	}
	if p.opts.Catalog != nil {
		r, err := h.forward(q)
		if err != nil {
			p.mu.Lock()
			p.unknown = append(p.unknown, q)
			p.mu.Unlock()
		}
		return r, err
	}
	p.mu.Lock()
	p.unknown = append(p.unknown, q)
	p.mu.Unlock()
	return nil, mysql.NewError(mysql.ER_NOT_SUPPORTED_YET, "mysqlprimary does not answer: "+q)
}

func (p *Primary) is84() bool {
	return strings.HasPrefix(p.opts.Version, "8.4") || strings.HasPrefix(p.opts.Version, "9.")
}

func grantRows(user string, lines []string) (*mysql.Result, error) {
	rows := make([][]any, len(lines))
	for i, g := range lines {
		rows[i] = []any{g}
	}
	return results([]string{"Grants for " + user + "@%"}, rows)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// variable is a global variable's value as MySQL 8 shows it.
func (p *Primary) variable(name string) (string, bool) {
	if v, ok := p.opts.Variables[name]; ok {
		return v, true
	}
	switch name {
	case "version":
		return p.opts.Version, true
	case "version_comment":
		return "MySQL Community Server - GPL", true
	case "server_id":
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Sprint(p.opts.ServerID), true
	case "server_uuid":
		return p.UUID().String(), true
	case "gtid_mode":
		return "ON", true
	case "enforce_gtid_consistency":
		return "ON", true
	case "gtid_executed":
		return p.Executed(), true
	case "gtid_purged":
		p.Binlog.mu.Lock()
		defer p.Binlog.mu.Unlock()
		return p.files[0].prev.String(), true
	case "log_bin":
		return "1", true
	case "binlog_format":
		return "ROW", true
	case "binlog_row_image":
		return "FULL", true
	case "binlog_row_metadata":
		return p.opts.Metadata, true
	case "binlog_row_value_options":
		return "", true
	case "binlog_checksum":
		if p.opts.NoChecksum {
			return "NONE", true
		}
		return "CRC32", true
	case "binlog_transaction_compression":
		p.Binlog.mu.Lock()
		defer p.Binlog.mu.Unlock()
		if p.compress {
			return "ON", true
		}
		return "OFF", true
	case "sql_mode":
		return "ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION", true
	case "time_zone":
		return "SYSTEM", true
	case "system_time_zone":
		return "UTC", true
	case "character_set_server":
		return "utf8mb4", true
	case "collation_server":
		return "utf8mb4_0900_ai_ci", true
	case "lower_case_table_names":
		return "0", true
	case "max_allowed_packet":
		return "67108864", true
	case "datadir":
		return "/var/lib/mysql/", true
	case "auto_increment_increment", "auto_increment_offset":
		return "1", true
	case "default_authentication_plugin":
		if p.is84() {
			return "", false // removed in 8.4
		}
		return p.opts.Auth, true
	case "authentication_policy":
		return "*,,", true
	}
	return "", false
}

// result is a one-row text result set.
func result(names []string, row []any) (*mysql.Result, error) {
	return results(names, [][]any{row})
}

func results(names []string, rows [][]any) (*mysql.Result, error) {
	if rows == nil {
		rows = [][]any{}
	}
	for _, row := range rows {
		for i, v := range row {
			if v == "" {
				row[i] = []byte{} // go-mysql writes an empty string as NULL
			}
		}
	}
	rs, err := mysql.BuildSimpleTextResultset(names, rows)
	if err != nil {
		return nil, err
	}
	return mysql.NewResult(rs), nil
}

// HandleRegisterSlave accepts a replica (COM_REGISTER_SLAVE).
func (h *handler) HandleRegisterSlave([]byte) error { return nil }

// HandleBinlogDump serves the binlog from a file and position: a fake ROTATE that names the file,
// the file's format description (with log_pos 0 when the dump starts inside the file), then every
// event, across rotations, as they are written.
func (h *handler) HandleBinlogDump(pos mysql.Position) (*replication.BinlogStreamer, error) {
	c, err := h.p.seek(pos)
	if err != nil {
		return nil, err
	}
	return h.stream(c, pos.Pos), nil
}

// HandleBinlogDumpGTID serves the binlog to a replica that has gtidSet: from the oldest file whose
// previous GTIDs it has, leaving out the transactions it has.
func (h *handler) HandleBinlogDumpGTID(set *mysql.MysqlGTIDSet) (*replication.BinlogStreamer, error) {
	c, err := h.p.seekGTID(set)
	if err != nil {
		return nil, err
	}
	return h.stream(c, 4), nil
}

func (h *handler) stream(c cursor, startPos uint32) *replication.BinlogStreamer {
	s := replication.NewBinlogStreamerWithChanSize(64)
	b := h.p.Binlog
	go func() {
		<-h.done
		s.AddErrorToStreamer(errDumpClosed) // frees a send to a writer that is gone
	}()
	// the fake rotate: no checksum (the replica said @source_binlog_checksum='NONE' for it, as
	// go-mysql and mysqlbinlog do), timestamp 0, log_pos 0, LOG_EVENT_ARTIFICIAL_F
	plain := b.srv
	plain.Checksum = false
	rot := plain.Encode(Rotate{Next: c.name, Pos: uint64(startPos)}, 0, 0)
	rot[17] |= byte(replication.LOG_EVENT_ARTIFICIAL_F)
	first := [][]byte{rot}
	if c.ev > 0 {
		first = append(first, b.formatDescription(c.name))
	}
	go func() {
		for _, raw := range first {
			if s.AddEventToStreamer(&replication.BinlogEvent{RawData: raw}) != nil {
				return
			}
		}
		for {
			evs, err := b.next(&c, h.done)
			if err != nil {
				s.AddErrorToStreamer(err)
				return
			}
			for _, ev := range evs {
				if s.AddEventToStreamer(&replication.BinlogEvent{RawData: ev.raw}) != nil {
					return
				}
			}
		}
	}()
	return s
}
