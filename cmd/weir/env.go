package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/weir-gateway/weir/config"
)

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// loadConfig loads the config file at path; a missing one says where to
// find one.
func loadConfig(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w (give the config file with -c FILE; examples/weir.yaml documents every setting)", err)
	}
	return cfg, err
}
