package clusterrun

import (
	"testing"

	"github.com/hepcache/hepcache/internal/realclient"
)

// hepcacheBin is the binary under test.
var hepcacheBin string

func TestMain(m *testing.M) { realclient.HepcacheMain(m, &hepcacheBin) }
