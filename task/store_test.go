package task

import (
	"database/sql"

	"github.com/weir-gateway/weir/sqlite"
)

var _ Store[*sql.Tx] = (*sqlite.DB)(nil)
