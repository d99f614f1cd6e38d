package meta

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/tributary-db/tributary/vocab"
)

// Privileges are the ones the target user needs on the meta schema.
const Privileges = "CREATE, DROP, ALTER, SELECT, INSERT, UPDATE"

// Probe checks, as the user of db, that the task's meta tables can be created and written (the
// prechecks run it): it creates the meta schema if it is missing (it is Tributary's own), then
// creates each table with its exact DDL under a temporary name no user table has
// (tributary_probe_<random>_...), writes and reads rows as the workers do, and drops it. When the
// task's tables exist in the previous layout, it also checks ALTER (the workers migrate them). The
// error names the meta schema, what failed, and the server's answer.
func Probe(ctx context.Context, db *sql.DB, schema, task string) (err error) {
	sch := vocab.TableName{Schema: schema}
	var taken error // a table of a meta table's name that the task did not create: no privilege helps
	defer func() {
		if err != nil && taken == nil {
			err = fmt.Errorf("meta-schema %s: %w; the target user needs %s ON %s.*", sch, err, Privileges, sch)
		}
	}()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", schema).Scan(&n); err != nil {
		return fmt.Errorf("look for the schema: %w", err)
	}
	if n == 0 {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+sch.String()+" DEFAULT CHARACTER SET utf8mb4"); err != nil {
			return fmt.Errorf("cannot create the schema: %w", err)
		}
	}
	var migrate bool
	for _, c := range []struct {
		l layout
		t vocab.TableName
	}{{checkpointLayout, CheckpointTable(schema, task)}, {markerLayout, MarkerTable(schema, task)}} {
		in, err := c.l.inspect(ctx, db, c.t)
		if err != nil {
			return err
		}
		if c.l.owner(in, task) == ownerOther {
			taken = c.l.notOurs(c.t, task, in)
			return taken
		}
		switch in.state {
		case unknown:
			return fmt.Errorf("%s table %s of task %s has a layout this version does not know (primary key (%s))", c.l.what, c.t, task, strings.Join(in.key, ", "))
		case old:
			migrate = true
		}
	}
	var tag [6]byte
	if _, err := rand.Read(tag[:]); err != nil {
		return err
	}
	base := "tributary_probe_" + hex.EncodeToString(tag[:])
	ckpt, marker := vocab.TableName{Schema: schema, Name: base + checkpointSuffix}, vocab.TableName{Schema: schema, Name: base + markerSuffix}
	var created []vocab.TableName
	defer func() {
		for _, t := range created {
			if _, derr := db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE "+t.String()); derr != nil && err == nil {
				err = fmt.Errorf("cannot drop the probe table %s (start-task --remove-meta drops tables): %w", t, derr)
			}
		}
	}()
	for _, c := range []struct {
		l layout
		t vocab.TableName
	}{{checkpointLayout, ckpt}, {markerLayout, marker}} {
		if _, err := db.ExecContext(ctx, c.l.create(c.t, c.l.mark(task))); err != nil {
			return fmt.Errorf("cannot create a table like the %s table (probe %s): %w", c.l.what, c.t, err)
		}
		created = append(created, c.t)
	}
	st := newStore(db, ckpt, marker, "probe")
	st.SetEpoch(1)
	write := func() error {
		if err := st.ClaimEpoch(ctx); err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := st.CheckEpoch(ctx, tx, true); err != nil {
			return err
		}
		if err := st.Write(ctx, tx, CheckpointUpdate{Global: vocab.Position{File: "probe.000001", Pos: 4}}); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		cp, err := st.Load(ctx)
		if err != nil {
			return err
		}
		if cp.Global.Pos != 4 {
			return errors.New("a checkpoint row written was not read back")
		}
		if err := st.Mark(ctx, "probe", "probe", Marker{State: "done"}); err != nil {
			return err
		}
		_, _, err = st.Marker(ctx, "probe", "probe")
		return err
	}
	if err := write(); err != nil {
		return fmt.Errorf("cannot write and read the probe tables: %w", err)
	}
	if migrate {
		if _, err := db.ExecContext(ctx, "ALTER TABLE "+ckpt.String()+" COMMENT = 'probe'"); err != nil {
			return fmt.Errorf("the meta tables of task %s have the layout of an older version, which its workers migrate: cannot ALTER the probe table: %w", task, err)
		}
	}
	return nil
}
