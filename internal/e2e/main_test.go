package e2e

import (
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// hepcacheBin is the hepcache binary the process tests run.
var hepcacheBin string

func TestMain(m *testing.M) { realclient.HepcacheMain(m, &hepcacheBin) }
