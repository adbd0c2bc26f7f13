package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/weir-gateway/weir"
)

// CatalogPublisher publishes a config file's catalog as the fleet's
// newest version (POST /admin/catalog), as `weir apply` does: unless
// the newest has the same catalog; a catalog that is not valid publishes
// nothing, with an error matching weir.ErrInvalid. It returns the newest
// version, and whether it is the file's new one.
type CatalogPublisher func(ctx context.Context, file []byte) (weir.CatalogVersion, bool, error)

// CatalogPublished answers POST /admin/catalog: the fleet's newest
// version, and whether this request published it.
type CatalogPublished struct {
	Version     int64     `json:"version"`
	Hash        string    `json:"hash"`
	Published   bool      `json:"published"`
	PublishedBy string    `json:"published_by"`
	PublishedAt time.Time `json:"published_at"`
}

// publishCatalog answers POST /admin/catalog: the body is a config file
// (YAML), whose catalog sections are published; the rest is ignored, as
// `weir apply` ignores it.
func (s *Server) publishCatalog(w http.ResponseWriter, r *http.Request) error {
	if s.deps.PublishCatalog == nil {
		return errorf(weir.CodeInvalidRequest, "", "POST /admin/catalog publishes to a fleet on PostgreSQL; "+
			"on SQLite one weir serve serves its file's catalog: edit the file and send the process SIGHUP")
	}
	if aerr := s.limitBody(w, r); aerr != nil {
		return aerr
	}
	file, err := io.ReadAll(r.Body)
	if err != nil {
		return s.bodyError(err, "could not read the body")
	}
	if len(file) == 0 {
		return errorf(weir.CodeInvalidRequest, "", "the body must be a config file (YAML) whose catalog sections are published")
	}
	v, published, err := s.deps.PublishCatalog(r.Context(), file)
	switch {
	case errors.Is(err, weir.ErrInvalid):
		return errorf(weir.CodeInvalidRequest, "", "the catalog is not valid, and nothing was published: "+err.Error())
	case err != nil:
		infoOf(w).log().Error("could not publish a catalog", "error", err)
		return errorf(weir.CodeStoreUnavailable, "", "could not publish the catalog: nothing changed")
	}
	status := http.StatusOK
	if published {
		status = http.StatusCreated
	}
	writeJSON(w, status, CatalogPublished{Version: v.Version, Hash: v.Hash, Published: published,
		PublishedBy: v.PublishedBy, PublishedAt: v.PublishedAt})
	return nil
}
