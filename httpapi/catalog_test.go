package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weir-gateway/weir"
)

// postCatalog POSTs body to /admin/catalog with the given Authorization,
// and decodes the answer's body into out.
func (b *testBundle) postCatalog(t *testing.T, body, authorization string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.http.URL+"/admin/catalog", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("answer %s: %v", raw, err)
		}
	}
	return resp.StatusCode
}

type catalogErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// TestAdminCatalogPublish: POST /admin/catalog publishes its body's
// catalog (201, the version), says when the fleet's is that catalog
// already (200), answers a catalog that is not valid 400 in the API's
// error shape with nothing published, refuses an empty body, and takes
// the admin token as the other admin routes do.
func TestAdminCatalogPublish(t *testing.T) {
	t.Parallel()
	const token = "adm_catalog-token"
	var files []string
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	publish := func(_ context.Context, file []byte) (weir.CatalogVersion, bool, error) {
		if strings.Contains(string(file), "nowhere") {
			return weir.CatalogVersion{}, false, fmt.Errorf("platform model x/y: %w", weir.ErrInvalid)
		}
		same := len(files) > 0 && files[len(files)-1] == string(file)
		if !same {
			files = append(files, string(file))
		}
		return weir.CatalogVersion{Version: int64(len(files)), Hash: "h", PublishedBy: "admin api (a)", PublishedAt: at}, !same, nil
	}
	b := setup(t, setupOpts{cfg: Config{AdminToken: token}, deps: func(d *Deps) { d.PublishCatalog = publish }})
	auth := "Bearer " + token

	if got := b.postCatalog(t, "models: []\n", "", nil); got != http.StatusUnauthorized {
		t.Errorf("without the admin token: %d; want 401", got)
	}
	var pub CatalogPublished
	if got := b.postCatalog(t, "models: []\n", auth, &pub); got != http.StatusCreated || pub.Version != 1 || !pub.Published ||
		pub.PublishedBy != "admin api (a)" || !pub.PublishedAt.Equal(at) {
		t.Errorf("a new catalog: %d %+v; want 201, version 1 published", got, pub)
	}
	pub = CatalogPublished{}
	if got := b.postCatalog(t, "models: []\n", auth, &pub); got != http.StatusOK || pub.Version != 1 || pub.Published {
		t.Errorf("the same catalog again: %d %+v; want 200, version 1 not published", got, pub)
	}
	var e catalogErrorBody
	if got := b.postCatalog(t, "platform_models: [{name: x/y, platform: nowhere}]\n", auth, &e); got != http.StatusBadRequest ||
		e.Error.Code != string(weir.CodeInvalidRequest) || !strings.Contains(e.Error.Message, "nothing was published") {
		t.Errorf("a catalog that is not valid: %d %+v; want 400 invalid_request", got, e)
	}
	e = catalogErrorBody{}
	if got := b.postCatalog(t, "", auth, &e); got != http.StatusBadRequest || e.Error.Code != string(weir.CodeInvalidRequest) {
		t.Errorf("an empty body: %d %+v; want 400 invalid_request", got, e)
	}
	if len(files) != 1 {
		t.Errorf("%d catalogs published; want 1", len(files))
	}
}

// TestAdminCatalogRefusedOnSQLite: without a fleet to publish to (one
// process on SQLite) POST /admin/catalog is refused, as weir apply is;
// a store that fails is 503 with nothing changed.
func TestAdminCatalogRefusedOnSQLite(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{cfg: Config{AdminLoopback: true}})
	var e catalogErrorBody
	if got := b.postCatalog(t, "models: []\n", "", &e); got != http.StatusBadRequest || !strings.Contains(e.Error.Message, "SIGHUP") {
		t.Errorf("on SQLite: %d %+v; want 400 saying SIGHUP reloads the file", got, e)
	}
	down := setup(t, setupOpts{cfg: Config{AdminLoopback: true}, deps: func(d *Deps) {
		d.PublishCatalog = func(context.Context, []byte) (weir.CatalogVersion, bool, error) {
			return weir.CatalogVersion{}, false, errors.New("connection refused")
		}
	}})
	e = catalogErrorBody{}
	if got := down.postCatalog(t, "models: []\n", "", &e); got != http.StatusServiceUnavailable || e.Error.Code != string(weir.CodeStoreUnavailable) {
		t.Errorf("a store that fails: %d %+v; want 503 store_unavailable", got, e)
	}
}
