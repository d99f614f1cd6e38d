// dmctl: the command line of a Tributary cluster, printing DM-shaped JSON.
//
//	dmctl --master-addr 127.0.0.1:8261 shard-ddl-lock [TASK]
//	dmctl --master-addr 127.0.0.1:8261 shard-ddl-lock unlock LOCK-ID [--owner SOURCE] [--force-remove]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/tributary-db/tributary/proto"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage: dmctl --master-addr HOST:PORT COMMAND
commands:
  shard-ddl-lock [TASK]                                       show shard DDL locks
  shard-ddl-lock unlock LOCK-ID [--owner SOURCE] [--force-remove]  resolve a lock by hand`)
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dmctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("master-addr", "", "address of a dm-master")
	timeout := fs.Duration("rpc-timeout", 10*time.Minute, "timeout of one call")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if *addr == "" || len(rest) == 0 {
		usage(stderr)
		return 2
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintf(stderr, "dmctl: --master-addr %q: %v\n", *addr, err)
		return 1
	}
	defer conn.Close()
	client := pb.NewMasterClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var resp proto.Message
	switch {
	case rest[0] == "shard-ddl-lock" && len(rest) >= 2 && rest[1] == "unlock":
		ufs := flag.NewFlagSet("unlock", flag.ContinueOnError)
		ufs.SetOutput(stderr)
		owner := ufs.String("owner", "", "source that executes the DDLs (default: the lock's owner)")
		force := ufs.Bool("force-remove", false, "remove the lock's keys without executing anything")
		id, flags := "", rest[2:]
		if len(flags) > 0 && flags[0] != "" && flags[0][0] != '-' {
			id, flags = flags[0], flags[1:]
		}
		if err := ufs.Parse(flags); err != nil {
			return 2
		}
		if id == "" && ufs.NArg() == 1 {
			id = ufs.Arg(0)
		} else if ufs.NArg() > 0 {
			fmt.Fprintf(stderr, "dmctl: unexpected arguments %q\n", ufs.Args())
			return 2
		}
		if id == "" {
			fmt.Fprintln(stderr, "dmctl: shard-ddl-lock unlock needs a LOCK-ID (see shard-ddl-lock)")
			return 2
		}
		resp, err = client.UnlockDDLLock(ctx, &pb.UnlockDDLLockRequest{ID: id, ReplaceOwner: *owner, ForceRemove: *force})
	case rest[0] == "shard-ddl-lock" && len(rest) <= 2:
		task := ""
		if len(rest) == 2 {
			task = rest[1]
		}
		resp, err = client.ShowDDLLocks(ctx, &pb.ShowDDLLocksRequest{Task: task})
	default:
		fmt.Fprintf(stderr, "dmctl: unknown command %q\n", rest)
		usage(stderr)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "dmctl: %s: %v\n", *addr, err)
		return 1
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "    ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(resp)
	if err != nil {
		fmt.Fprintln(stderr, "dmctl:", err)
		return 1
	}
	fmt.Fprintln(stdout, string(out))
	return 0
}
