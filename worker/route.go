package worker

import (
	"github.com/tributary-db/tributary/router"
	"github.com/tributary-db/tributary/shardgroup"
)

// TableName is an upstream or downstream table.
type TableName = shardgroup.TableName

// Router is router.Router: the block-allow-list and route rules of a task.
type Router = router.Router

// NewRouter is router.NewRouter.
var NewRouter = router.NewRouter
