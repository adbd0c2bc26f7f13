package fleet

import (
	"log/slog"

	"github.com/weir-gateway/weir/admission"
)

// dropped logs at warn, and counts (Config.Dropped), an error of a step
// the fleet takes on its own, which no caller waits for: a release of a
// lease nobody holds any more, a fence or an activation replayed from a
// replica's sync, a waiter cancelled after its caller left. An error such
// a step meets in the normal course (admission.Routine) is neither logged
// nor counted.
func dropped(cfg *Config, log *slog.Logger, op string, err error) {
	if err == nil || admission.Routine(err) {
		return
	}
	log.Warn("fleet: an error that only the log sees", "op", op, "error", err)
	if cfg.Dropped != nil {
		cfg.Dropped(op)
	}
}
