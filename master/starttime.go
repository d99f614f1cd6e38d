package master

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"go.uber.org/zap"

	"github.com/tributary-db/tributary/config"
	"github.com/tributary-db/tributary/dbutil"
	"github.com/tributary-db/tributary/meta"
	"github.com/tributary-db/tributary/starttime"
)

// timeStart is what start-task --start-time decided for one source.
type timeStart struct {
	point *starttime.Point // nil: the source keeps its checkpoint
	msg   string           // the source's msg in the answer
}

// checkStartTime refuses --start-time where it cannot apply, before anything is checked or changed.
func checkStartTime(task *config.Task, text string) (starttime.Time, error) {
	if task.Dumps() {
		return starttime.Time{}, fmt.Errorf("--start-time applies to task-mode incremental only: task %s is task-mode %s, "+
			"whose full load takes each source's position from its snapshot; nothing started", task.Name, task.TaskMode)
	}
	at, err := starttime.Parse(text)
	if err != nil {
		return starttime.Time{}, fmt.Errorf("%w; nothing started", err)
	}
	return at, nil
}

// timePositions finds, for each source of the task without a checkpoint (every source when fresh:
// --remove-meta drops them), the position of the first event group at or after the time, through the
// source's own connection; a time without an offset is read in each source's time zone. Any source
// whose position cannot be found fails the whole start, naming the source.
func (s *Service) timePositions(ctx context.Context, task *config.Task, srcs map[string]*config.Source, at starttime.Time, fresh bool) (map[string]timeStart, error) {
	down, err := dbutil.OpenDB(task.TargetDatabase)
	if err != nil {
		return nil, err
	}
	defer down.Close()
	out := map[string]timeStart{}
	var errs []error
	for _, inst := range task.MySQLInstances {
		id := inst.SourceID
		if !fresh {
			has, err := meta.HasCheckpoint(ctx, down, task.MetaSchema, task.Name, id)
			if err != nil {
				return nil, fmt.Errorf("read checkpoint of task %s: %w", task.Name, err)
			}
			if has {
				out[id] = timeStart{msg: fmt.Sprintf("--start-time %s does not apply to this source: it resumes from its checkpoint "+
					"(start-task --remove-meta drops the task's checkpoints, then the time applies to every source)", at.Text)}
				continue
			}
		}
		p, err := findTime(ctx, task.Name, srcs[id], at, s.logger().With(zap.String("task", task.Name), zap.String("source", id)))
		if err != nil {
			errs = append(errs, fmt.Errorf("source %s (%s): --start-time %s: %w", id, srcs[id].From, at.Text, err))
			continue
		}
		out[id] = timeStart{point: &p, msg: timeMsg(at, p)}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w; nothing started", err)
	}
	return out, nil
}

func findTime(ctx context.Context, task string, src *config.Source, at starttime.Time, log *zap.Logger) (starttime.Point, error) {
	db, err := dbutil.OpenDB(src.From)
	if err != nil {
		return starttime.Point{}, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ts, err := at.Unix(ctx, db)
	if err != nil {
		return starttime.Point{}, err
	}
	flavor := src.Flavor
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return starttime.Point{}, err
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		flavor = mysql.MariaDBFlavor // as the worker detects it
	}
	tlsConfig, err := src.From.TLSConfig("source " + src.SourceID + " from")
	if err != nil {
		return starttime.Point{}, err
	}
	// A replica ID of its own: the search must not take the ID of a worker reading the source.
	h := fnv.New32a()
	h.Write([]byte(task + "\x00" + src.SourceID + "\x00start-time"))
	return starttime.Find(ctx, db, starttime.Source{
		Host: src.From.Host, Port: uint16(src.From.Port), User: src.From.User, Password: src.From.PlainPassword(), TLS: tlsConfig,
		Flavor: flavor, ServerID: 0x30000000 | h.Sum32()&0x0fffffff, GTID: src.EnableGTID && flavor == mysql.MariaDBFlavor,
	}, ts, log)
}

// timeMsg tells where a source starts for the time.
func timeMsg(at starttime.Time, p starttime.Point) string {
	gtid := ""
	if p.GTID != "" {
		gtid = ", GTID set " + p.GTID
	}
	if p.AtEnd {
		return fmt.Sprintf("--start-time %s: no event group of the source begins at or after it: starts at the current position %s%s "+
			"(as a task without meta)", at.Text, p.Pos, gtid)
	}
	return fmt.Sprintf("--start-time %s: starts at %s%s, the first event group at or after it (its first event at %s)",
		at.Text, p.Pos, gtid, time.Unix(int64(p.Event), 0).UTC().Format(time.RFC3339))
}
