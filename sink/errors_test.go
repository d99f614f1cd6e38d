package sink

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestErrorClasses(t *testing.T) {
	for _, c := range []struct {
		err       error
		permanent bool
	}{
		{&mysql.MySQLError{Number: 1062, Message: "Duplicate entry"}, true},
		{fmt.Errorf("insert: %w", &mysql.MySQLError{Number: 1406}), true}, // data too long
		{&mysql.MySQLError{Number: 1146}, true},                           // missing table
		{&mysql.MySQLError{Number: 1064}, true},                           // a DDL the downstream cannot read
		{&mysql.MySQLError{Number: 1213}, false},                          // deadlock
		{&mysql.MySQLError{Number: 1205}, false},                          // lock wait timeout
		{&mysql.MySQLError{Number: 1290}, false},                          // read-only in a failover
		{mysql.ErrInvalidConn, false},
		{errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), false},
		{nil, false},
	} {
		if got := DownstreamPermanent(c.err); got != c.permanent {
			t.Errorf("%v: permanent %v, want %v", c.err, got, c.permanent)
		}
	}
}
