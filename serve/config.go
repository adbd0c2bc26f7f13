package serve

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/weir-gateway/weir/config"
)

// LoadConfig loads the config file at path; a missing one says where to
// find one.
func LoadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (give the config file with -c FILE; examples/weir.yaml documents every setting)", err)
	}
	return cfg, err
}
