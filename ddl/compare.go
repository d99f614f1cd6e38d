package ddl

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
	"github.com/pingcap/tidb/pkg/parser/format"
	"github.com/tributary-db/tributary/vocab"
)

// Whether the downstream already is what a DDL would make of it.
//
// A downstream DDL that fails with "already exists" or "does not exist" (a duplicate column or key
// name, a table or database that exists, a column, key, table or database that cannot be dropped)
// ran, as a whole, not at all: MariaDB runs each statement atomically. Whether that is harmless depends
// on what is there. CompareWithDownstream compares every part of the statement with the downstream's
// definition, as the statement would have left it:
//
//   - ADD, CHANGE, MODIFY COLUMN: a column of that name with the same definition: type (length,
//     precision, UNSIGNED, ZEROFILL, ENUM and SET members; an integer's display width does not
//     count), nullability, default, ON UPDATE, AUTO_INCREMENT, generated expression, and for a
//     string column its character set and collation (the statement's, else the table's). Position
//     and comment do not count. CHANGE also needs the old name gone; an inline PRIMARY KEY or UNIQUE
//     needs that key.
//   - ADD INDEX, CREATE INDEX, ADD PRIMARY KEY / UNIQUE / FULLTEXT, ADD FOREIGN KEY: a key of that
//     name (an unnamed one: any) of the same kind on the same columns and prefix lengths (a foreign
//     key: the same columns, referenced table and columns).
//   - ALTER COLUMN SET / DROP DEFAULT: that default; RENAME COLUMN and RENAME INDEX: the old name
//     gone and the new one there.
//   - DROP COLUMN, INDEX, PRIMARY KEY, FOREIGN KEY, TABLE, DATABASE: not there.
//   - CREATE TABLE: the same columns (each as above, in any order) and the same keys; table options
//     and partitioning do not count. CREATE TABLE ... LIKE and ... SELECT cannot be compared.
//   - CREATE DATABASE: the database is there (its options do not count). RENAME TABLE: every old
//     name gone and every new one there.
//   - IF NOT EXISTS / IF EXISTS parts: the object there, or not, whatever its definition (that is
//     what the part would have left).
//
// Any other part (table options, partitions, CHECK constraints, ALGORITHM and LOCK aside) cannot be
// compared: the answer is then unknown, which a caller must not take for "applied". So is a
// definition the parser cannot read.

// Downstream is what the downstream holds of the objects a DDL names.
type Downstream struct {
	// Tables holds the SHOW CREATE TABLE of each table that is there; a table not in it is absent.
	Tables map[vocab.TableName]string
	// Databases holds the databases that are there.
	Databases map[string]bool
}

// Comparison is CompareWithDownstream's answer.
type Comparison struct {
	// Known is false when the statement has a part whose effect cannot be read off the downstream,
	// or a definition cannot be read; Reason says which.
	Known bool
	// Same: the downstream already is what the statement would make of it.
	Same bool
	// Reason is the first difference, or what was found.
	Reason string
	// Have is the downstream's definition of the first object that differs ("" when it is absent);
	// Want is what the statement would have made of it ("" when the statement removes it).
	Have, Want string
}

func sameAs(format string, args ...any) Comparison {
	return Comparison{Known: true, Same: true, Reason: fmt.Sprintf(format, args...)}
}

func unknown(format string, args ...any) Comparison {
	return Comparison{Reason: fmt.Sprintf(format, args...)}
}

// CompareWithDownstream reports whether down already is what ddl, one statement with qualified
// table names, would have made of it (see above). It does no I/O.
func CompareWithDownstream(ddl string, down Downstream) (c Comparison) {
	stmts, err := parse(ddl)
	if err != nil {
		return unknown("the statement cannot be read: %v", err)
	}
	if len(stmts) != 1 {
		return unknown("%d statements, not one", len(stmts))
	}
	return compareWithDownstream(stmts[0], down)
}

func compareWithDownstream(node ast.StmtNode, down Downstream) (c Comparison) {
	defer func() {
		// An AST of a shape this code did not expect is "cannot tell", never "applied".
		if r := recover(); r != nil {
			c = unknown("comparing it failed: %v", r)
		}
	}()
	exists := func(tn *ast.TableName) (vocab.TableName, bool) {
		t := vocab.TableName{Schema: tn.Schema.O, Name: tn.Name.O}
		_, ok := down.Tables[t]
		return t, ok
	}
	switch s := node.(type) {
	case *ast.CreateDatabaseStmt:
		if down.Databases[s.Name.O] {
			return sameAs("database `%s` is there (its options are not compared)", s.Name.O)
		}
		return Comparison{Known: true, Reason: fmt.Sprintf("database `%s` is not there", s.Name.O)}
	case *ast.DropDatabaseStmt:
		if down.Databases[s.Name.O] {
			return Comparison{Known: true, Reason: fmt.Sprintf("database `%s` is still there", s.Name.O), Have: "database `" + s.Name.O + "`"}
		}
		return sameAs("database `%s` is not there", s.Name.O)
	case *ast.DropTableStmt:
		if s.IsView {
			return unknown("DROP VIEW is not compared")
		}
		for _, tn := range s.Tables {
			if t, ok := exists(tn); ok {
				return Comparison{Known: true, Reason: fmt.Sprintf("table %s is still there", t), Have: down.Tables[t]}
			}
		}
		return sameAs("the tables are not there")
	case *ast.RenameTableStmt:
		for _, tt := range s.TableToTables {
			if t, ok := exists(tt.OldTable); ok {
				return Comparison{Known: true, Reason: fmt.Sprintf("table %s is still there", t), Have: down.Tables[t]}
			}
			if t, ok := exists(tt.NewTable); !ok {
				return Comparison{Known: true, Reason: fmt.Sprintf("table %s is not there", t)}
			}
		}
		return sameAs("the old names are gone and the new ones there")
	case *ast.CreateTableStmt:
		return compareCreateTable(s, down)
	case *ast.CreateIndexStmt:
		d, c := tableOf(s.Table, down)
		if !c.Known || d == nil {
			return c
		}
		w := wants{}
		if s.IfNotExists {
			w.index(s.IndexName, nil)
		} else {
			w.index(s.IndexName, indexOfParts(indexKind(s.KeyType), s.IndexName, s.IndexPartSpecifications))
		}
		return w.compare(d)
	case *ast.DropIndexStmt:
		d, c := tableOf(s.Table, down)
		if !c.Known || d == nil {
			return c
		}
		w := wants{}
		w.dropIndex(s.IndexName)
		return w.compare(d)
	case *ast.AlterTableStmt:
		d, c := tableOf(s.Table, down)
		if !c.Known || d == nil {
			return c
		}
		w, c := alterWants(s, d)
		if !c.Known {
			return c
		}
		return w.compare(d)
	}
	return unknown("%T is not compared", node)
}

// tableOf reads the downstream definition of the table tn names: nil with a known difference when the
// table is not there.
func tableOf(tn *ast.TableName, down Downstream) (*table, Comparison) {
	t := vocab.TableName{Schema: tn.Schema.O, Name: tn.Name.O}
	text, ok := down.Tables[t]
	if !ok {
		return nil, Comparison{Known: true, Reason: fmt.Sprintf("table %s is not there", t)}
	}
	d, err := readTable(text)
	if err != nil {
		return nil, unknown("the definition of %s cannot be read: %v", t, err)
	}
	return d, Comparison{Known: true}
}

// table is a downstream table's definition, from its SHOW CREATE TABLE.
type table struct {
	text             string
	charset, collate string // the table's defaults
	columns          map[string]*ast.ColumnDef
	order            []string // column names (lower case) in order
	indexes          map[string]*index
	foreignKeys      map[string]*ast.Constraint
}

func readTable(text string) (*table, error) {
	stmts, err := parse(text)
	if err != nil {
		return nil, err
	}
	ct, ok := stmts[0].(*ast.CreateTableStmt)
	if len(stmts) != 1 || !ok {
		return nil, fmt.Errorf("not a CREATE TABLE")
	}
	t := &table{text: text, columns: map[string]*ast.ColumnDef{}, indexes: map[string]*index{}, foreignKeys: map[string]*ast.Constraint{}}
	t.charset, t.collate = tableCharset(ct.Options)
	for _, c := range ct.Cols {
		n := strings.ToLower(c.Name.Name.O)
		t.columns[n] = c
		t.order = append(t.order, n)
	}
	for _, ix := range inlineKeys(ct.Cols) {
		t.indexes[strings.ToLower(ix.name)] = ix
	}
	for _, c := range ct.Constraints {
		switch {
		case c.Tp == ast.ConstraintForeignKey:
			t.foreignKeys[strings.ToLower(c.Name)] = c
		case constraintKind(c.Tp) != "":
			ix := indexOfConstraint(c)
			t.indexes[strings.ToLower(ix.name)] = ix
		}
	}
	return t, nil
}

func tableCharset(opts []*ast.TableOption) (cs, coll string) {
	for _, o := range opts {
		switch o.Tp {
		case ast.TableOptionCharset:
			cs = o.StrValue
		case ast.TableOptionCollate:
			coll = o.StrValue
		}
	}
	return normalizeCharset(cs), normalizeCharset(coll)
}

// line is the line of the SHOW CREATE TABLE that defines an object: the first whose text, trimmed,
// starts with prefix (compared case-insensitively), without its trailing comma.
func (t *table) line(prefix string) string {
	for _, l := range strings.Split(t.text, "\n") {
		l = strings.TrimSpace(l)
		if len(l) >= len(prefix) && strings.EqualFold(l[:len(prefix)], prefix) {
			return strings.TrimSuffix(l, ",")
		}
	}
	return ""
}

func quote(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

func (t *table) columnLine(name string) string { return t.line(quote(name) + " ") }

func (t *table) indexLine(ix *index) string {
	if ix.kind == "PRIMARY KEY" {
		return t.line("PRIMARY KEY ")
	}
	return t.line(ix.kind + " " + quote(ix.name) + " ")
}

// index is a key: its kind ("PRIMARY KEY", "UNIQUE KEY", "KEY", "FULLTEXT KEY"), name and parts
// ("`c`(2)", lower case).
type index struct {
	kind, name string
	parts      []string
}

func (ix *index) String() string {
	return ix.kind + " " + quote(ix.name) + " (" + strings.Join(ix.parts, ",") + ")"
}

func (ix *index) sameKey(o *index) bool { return ix.kind == o.kind && slices.Equal(ix.parts, o.parts) }

func constraintKind(tp ast.ConstraintType) string {
	switch tp {
	case ast.ConstraintPrimaryKey:
		return "PRIMARY KEY"
	case ast.ConstraintKey, ast.ConstraintIndex:
		return "KEY"
	case ast.ConstraintUniq, ast.ConstraintUniqKey, ast.ConstraintUniqIndex:
		return "UNIQUE KEY"
	case ast.ConstraintFulltext:
		return "FULLTEXT KEY"
	}
	return ""
}

func indexKind(tp ast.IndexKeyType) string {
	switch tp {
	case ast.IndexKeyTypeNone:
		return "KEY"
	case ast.IndexKeyTypeUnique:
		return "UNIQUE KEY"
	case ast.IndexKeyTypeFulltext:
		return "FULLTEXT KEY"
	}
	return ""
}

func indexOfConstraint(c *ast.Constraint) *index {
	name := c.Name
	if c.Tp == ast.ConstraintPrimaryKey {
		name = "PRIMARY"
	}
	return indexOfParts(constraintKind(c.Tp), name, c.Keys)
}

func indexOfParts(kind, name string, parts []*ast.IndexPartSpecification) *index {
	ix := &index{kind: kind, name: name}
	for _, p := range parts {
		s := "(" + restoreNode(p.Expr) + ")"
		if p.Column != nil {
			s = quote(strings.ToLower(p.Column.Name.O))
		}
		if p.Length > 0 {
			s += fmt.Sprintf("(%d)", p.Length)
		}
		ix.parts = append(ix.parts, s)
	}
	return ix
}

// inlineKeys are the keys that PRIMARY KEY and UNIQUE in column definitions make (a UNIQUE key is
// named after its column).
func inlineKeys(cols []*ast.ColumnDef) []*index {
	var out []*index
	for _, c := range cols {
		col := quote(strings.ToLower(c.Name.Name.O))
		for _, o := range c.Options {
			switch o.Tp {
			case ast.ColumnOptionPrimaryKey:
				out = append(out, &index{kind: "PRIMARY KEY", name: "PRIMARY", parts: []string{col}})
			case ast.ColumnOptionUniqKey:
				out = append(out, &index{kind: "UNIQUE KEY", name: c.Name.Name.O, parts: []string{col}})
			}
		}
	}
	return out
}

func restoreNode(n ast.Node) string {
	if n == nil {
		return ""
	}
	var sb strings.Builder
	if err := n.Restore(format.NewRestoreCtx(restoreFlags, &sb)); err != nil {
		return fmt.Sprintf("%T", n)
	}
	return sb.String()
}

// wants is what a statement leaves on one table: each column, key and foreign key it adds (with its
// definition, or nil for "there, whatever its definition"), changes or removes, by lower-case name.
type wants struct {
	columns     map[string]*columnWant
	colOrder    []string
	indexes     map[string]*indexWant
	idxOrder    []string
	anonymous   []*index // keys without a name: any key of the same kind and parts
	foreignKeys map[string]*fkWant
	fkOrder     []string
	charset     string // for CREATE TABLE: the character set and collation its columns take by default
	collate     string
	createTable bool // every column and key of the table is wanted, and no other
}

type columnWant struct {
	name    string
	present bool
	def     *ast.ColumnDef // nil: any definition
	// defaultOnly: ALTER COLUMN sets (or, nil, drops) only the default of a column the statement does
	// not otherwise define.
	defaultOnly bool
	dflt        ast.ExprNode
}

// fkWant is a foreign key wanted there (with its definition, or nil: any) or gone.
type fkWant struct {
	present bool
	c       *ast.Constraint
}

type indexWant struct {
	name    string
	present bool
	ix      *index // nil: any key of that name
}

func (w *wants) column(name string, cw *columnWant) {
	if w.columns == nil {
		w.columns = map[string]*columnWant{}
	}
	n := strings.ToLower(name)
	if _, ok := w.columns[n]; !ok {
		w.colOrder = append(w.colOrder, n)
	}
	cw.name = name
	w.columns[n] = cw
}

func (w *wants) index(name string, ix *index) {
	if name == "" {
		if ix != nil {
			w.anonymous = append(w.anonymous, ix)
		}
		return
	}
	if w.indexes == nil {
		w.indexes = map[string]*indexWant{}
	}
	n := strings.ToLower(name)
	if _, ok := w.indexes[n]; !ok {
		w.idxOrder = append(w.idxOrder, n)
	}
	w.indexes[n] = &indexWant{name: name, present: true, ix: ix}
}

func (w *wants) dropIndex(name string) {
	w.index(name, nil)
	w.indexes[strings.ToLower(name)].present = false
}

func (w *wants) foreignKey(name string, fw *fkWant) {
	if w.foreignKeys == nil {
		w.foreignKeys = map[string]*fkWant{}
	}
	n := strings.ToLower(name)
	if _, ok := w.foreignKeys[n]; !ok {
		w.fkOrder = append(w.fkOrder, n)
	}
	w.foreignKeys[n] = fw
}

// addColumn wants def there, and the keys its PRIMARY KEY or UNIQUE make.
func (w *wants) addColumn(def *ast.ColumnDef, ifNotExists bool) {
	if ifNotExists {
		w.column(def.Name.Name.O, &columnWant{present: true})
		return
	}
	w.column(def.Name.Name.O, &columnWant{present: true, def: def})
	for _, ix := range inlineKeys([]*ast.ColumnDef{def}) {
		if ix.kind == "PRIMARY KEY" {
			w.index(ix.name, ix)
		} else {
			w.anonymous = append(w.anonymous, ix) // named after the column, or with a suffix
		}
	}
}

// alterWants is what an ALTER TABLE on d would leave, part by part (a later part of the same name
// overrides an earlier one).
func alterWants(s *ast.AlterTableStmt, d *table) (wants, Comparison) {
	var w wants
	for _, spec := range s.Specs {
		switch spec.Tp {
		case ast.AlterTableAlgorithm, ast.AlterTableLock:
		case ast.AlterTableAddColumns:
			if len(spec.NewConstraints) > 0 {
				return w, unknown("ADD COLUMN with constraints is not compared")
			}
			for _, c := range spec.NewColumns {
				if hasOption(c, ast.ColumnOptionReference) {
					return w, unknown("a column with REFERENCES is not compared")
				}
				w.addColumn(c, spec.IfNotExists)
			}
		case ast.AlterTableDropColumn:
			w.column(spec.OldColumnName.Name.O, &columnWant{})
		case ast.AlterTableModifyColumn, ast.AlterTableChangeColumn:
			def := spec.NewColumns[0]
			if hasOption(def, ast.ColumnOptionReference) {
				return w, unknown("a column with REFERENCES is not compared")
			}
			if spec.Tp == ast.AlterTableChangeColumn && !strings.EqualFold(spec.OldColumnName.Name.O, def.Name.Name.O) {
				w.column(spec.OldColumnName.Name.O, &columnWant{})
			}
			w.addColumn(def, false)
		case ast.AlterTableRenameColumn:
			w.column(spec.OldColumnName.Name.O, &columnWant{})
			w.column(spec.NewColumnName.Name.O, &columnWant{present: true})
		case ast.AlterTableAlterColumn:
			def := spec.NewColumns[0]
			// SET DEFAULT is one option holding the value (of no type), DROP DEFAULT none.
			var dflt ast.ExprNode
			if len(def.Options) == 1 {
				dflt = def.Options[0].Expr
			}
			if len(def.Options) > 1 || (len(def.Options) == 1 && dflt == nil) {
				return w, unknown("ALTER COLUMN %s other than SET or DROP DEFAULT is not compared", quote(def.Name.Name.O))
			}
			n := strings.ToLower(def.Name.Name.O)
			if cw, ok := w.columns[n]; ok && cw.def != nil {
				return w, unknown("ALTER COLUMN of a column the same statement defines is not compared")
			}
			w.column(def.Name.Name.O, &columnWant{present: true, defaultOnly: true, dflt: dflt})
		case ast.AlterTableAddConstraint:
			c := spec.Constraint
			switch {
			case c.Tp == ast.ConstraintForeignKey:
				if c.Name == "" {
					return w, unknown("a foreign key without a name is not compared")
				}
				fw := &fkWant{present: true, c: c}
				if c.IfNotExists {
					fw.c = nil
				}
				w.foreignKey(c.Name, fw)
			case constraintKind(c.Tp) != "":
				ix := indexOfConstraint(c)
				if c.IfNotExists {
					w.index(ix.name, nil)
				} else {
					w.index(ix.name, ix)
				}
			default:
				return w, unknown("ADD CONSTRAINT of this kind is not compared")
			}
		case ast.AlterTableDropIndex:
			w.dropIndex(spec.Name)
		case ast.AlterTableDropPrimaryKey:
			w.dropIndex("PRIMARY")
		case ast.AlterTableDropForeignKey:
			w.foreignKey(spec.Name, &fkWant{})
		case ast.AlterTableRenameIndex:
			w.dropIndex(spec.FromKey.O)
			w.index(spec.ToKey.O, nil)
		default:
			return w, unknown("this ALTER TABLE clause is not compared: %s", clauseOf(spec))
		}
	}
	w.charset, w.collate = d.charset, d.collate
	return w, Comparison{Known: true}
}

func clauseOf(spec *ast.AlterTableSpec) string {
	s := restoreNode(spec)
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

func hasOption(def *ast.ColumnDef, tp ast.ColumnOptionType) bool {
	for _, o := range def.Options {
		if o.Tp == tp {
			return true
		}
	}
	return false
}

func compareCreateTable(s *ast.CreateTableStmt, down Downstream) Comparison {
	if s.ReferTable != nil {
		return unknown("CREATE TABLE ... LIKE is not compared")
	}
	if s.Select != nil {
		return unknown("CREATE TABLE ... SELECT is not compared")
	}
	d, c := tableOf(s.Table, down)
	if !c.Known || d == nil {
		return c
	}
	if s.IfNotExists {
		return sameAs("table %s is there", vocab.TableName{Schema: s.Table.Schema.O, Name: s.Table.Name.O})
	}
	w := wants{createTable: true}
	w.charset, w.collate = tableCharset(s.Options)
	if w.charset == "" && w.collate != "" {
		w.charset = charsetOfCollation(w.collate)
	}
	for _, col := range s.Cols {
		if hasOption(col, ast.ColumnOptionReference) {
			return unknown("a column with REFERENCES is not compared")
		}
		w.addColumn(col, false)
	}
	for _, c := range s.Constraints {
		switch {
		case c.Tp == ast.ConstraintForeignKey:
			if c.Name == "" {
				return unknown("a foreign key without a name is not compared")
			}
			w.foreignKey(c.Name, &fkWant{present: true, c: c})
		case constraintKind(c.Tp) != "":
			ix := indexOfConstraint(c)
			w.index(ix.name, ix)
		default:
			return unknown("CREATE TABLE with a CHECK constraint is not compared")
		}
	}
	return w.compare(d)
}

// compare checks d against w: the first difference, or the same.
func (w *wants) compare(d *table) Comparison {
	differs := func(reason, have, want string) Comparison {
		return Comparison{Known: true, Reason: reason, Have: have, Want: want}
	}
	for _, n := range w.colOrder {
		cw := w.columns[n]
		have, there := d.columns[n]
		switch {
		case !cw.present && there:
			return differs(fmt.Sprintf("column %s is there, the statement removes it", quote(cw.name)), d.columnLine(cw.name), "")
		case !cw.present:
		case !there:
			return differs(fmt.Sprintf("column %s is not there", quote(cw.name)), "", restoreNode(cw.def))
		case cw.defaultOnly:
			hc := normalized(have, d.charset, d.collate)
			want := "no default"
			if cw.dflt != nil {
				want = "DEFAULT " + restoreNode(cw.dflt)
			}
			if !sameDefault(hc, cw.dflt) {
				return differs(fmt.Sprintf("column %s has not the default the statement sets (%s)", quote(cw.name), want), d.columnLine(cw.name), want)
			}
		case cw.def != nil:
			hc, wc := normalized(have, d.charset, d.collate), normalized(cw.def, w.charset, w.collate)
			if why := hc.differs(wc); why != "" {
				return differs(fmt.Sprintf("column %s differs (%s)", quote(cw.name), why), d.columnLine(cw.name), restoreNode(cw.def))
			}
		}
	}
	if w.createTable {
		for _, n := range d.order {
			if _, ok := w.columns[n]; !ok {
				return differs(fmt.Sprintf("column %s is there, the statement does not define it", quote(n)), d.columnLine(n), "")
			}
		}
	}
	matched := map[*index]bool{}
	for _, n := range w.idxOrder {
		iw := w.indexes[n]
		have, there := d.indexes[n]
		switch {
		case !iw.present && there:
			return differs(fmt.Sprintf("key %s is there, the statement removes it", quote(iw.name)), d.indexLine(have), "")
		case !iw.present:
		case !there:
			want := ""
			if iw.ix != nil {
				want = iw.ix.String()
			}
			return differs(fmt.Sprintf("key %s is not there", quote(iw.name)), "", want)
		case iw.ix != nil && !have.sameKey(iw.ix):
			return differs(fmt.Sprintf("key %s differs", quote(iw.name)), d.indexLine(have), iw.ix.String())
		default:
			matched[have] = true
		}
	}
	for _, want := range w.anonymous {
		found := false
		for _, n := range slices.Sorted(maps.Keys(d.indexes)) {
			if have := d.indexes[n]; !matched[have] && have.sameKey(want) {
				matched[have], found = true, true
				break
			}
		}
		if !found {
			return differs(fmt.Sprintf("no %s on (%s) is there", want.kind, strings.Join(want.parts, ",")), "", want.kind+" ("+strings.Join(want.parts, ",")+")")
		}
	}
	if w.createTable {
		for _, n := range slices.Sorted(maps.Keys(d.indexes)) {
			if have := d.indexes[n]; !matched[have] && d.foreignKeys[n] == nil {
				// (a key named after a foreign key is the one the server made for it)
				return differs(fmt.Sprintf("key %s is there, the statement does not define it", quote(have.name)), d.indexLine(have), "")
			}
		}
	}
	for _, n := range w.fkOrder {
		fw := w.foreignKeys[n]
		have, there := d.foreignKeys[n]
		switch {
		case !fw.present && there:
			return differs(fmt.Sprintf("foreign key %s is there, the statement removes it", quote(n)), d.line("CONSTRAINT "+quote(have.Name)+" "), "")
		case !fw.present:
		case !there:
			return differs(fmt.Sprintf("foreign key %s is not there", quote(n)), "", restoreNode(fw.c))
		case fw.c != nil && foreignKeyOf(have) != foreignKeyOf(fw.c):
			return differs(fmt.Sprintf("foreign key %s differs", quote(n)), d.line("CONSTRAINT "+quote(have.Name)+" "), restoreNode(fw.c))
		}
	}
	if w.createTable && len(d.foreignKeys) != len(w.foreignKeys) {
		return differs("the table has foreign keys the statement does not define", "", "")
	}
	return sameAs("the downstream table has every column and key the statement defines, with the same definitions")
}

// foreignKeyOf is what counts of a foreign key: its columns, referenced table and columns, and
// actions.
func foreignKeyOf(c *ast.Constraint) string {
	ix := indexOfParts("", "", c.Keys)
	s := strings.Join(ix.parts, ",")
	if r := c.Refer; r != nil {
		s += " REFERENCES " + strings.ToLower(r.Table.Name.O) + " (" + strings.Join(indexOfParts("", "", r.IndexPartSpecifications).parts, ",") + ")"
		if r.OnDelete != nil && r.OnDelete.ReferOpt != ast.ReferOptionNoOption && r.OnDelete.ReferOpt != ast.ReferOptionRestrict {
			s += " ON DELETE " + r.OnDelete.ReferOpt.String()
		}
		if r.OnUpdate != nil && r.OnUpdate.ReferOpt != ast.ReferOptionNoOption && r.OnUpdate.ReferOpt != ast.ReferOptionRestrict {
			s += " ON UPDATE " + r.OnUpdate.ReferOpt.String()
		}
	}
	return s
}
