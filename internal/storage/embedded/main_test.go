package embedded_test

import (
	"testing"

	"github.com/tranche/tranche/internal/storage/storagetest"
)

func TestMain(m *testing.M) { storagetest.Main(m) }
