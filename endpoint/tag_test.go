package endpoint

import (
	"errors"
	"strings"
	"testing"
)

func TestTagLayoutRoundTrip(t *testing.T) {
	cases := []struct {
		ctx  uint16
		slot uint8
		src  int
		tag  int
	}{
		{0, 0, 0, 0},
		{1, 0, 3, 7},
		{uint16(ctxMask), uint8(slotMask), MaxRanks - 1, TagUB},
		{2, 5, 12345, 999},
	}
	for _, c := range cases {
		tg := packTag(c.ctx, c.slot, c.src, c.tag)
		if tagIsRTS(tg) || tagIsCtrl(tg) {
			t.Fatalf("%+v: user tag %#x has protocol bits", c, tg)
		}
		if got := tagCtx(tg); got != c.ctx {
			t.Errorf("%+v: ctx %d", c, got)
		}
		if got := tagSlot(tg); got != c.slot {
			t.Errorf("%+v: slot %d", c, got)
		}
		if got := tagSource(tg); got != c.src {
			t.Errorf("%+v: src %d", c, got)
		}
		if got := tagUser(tg); got != c.tag {
			t.Errorf("%+v: tag %d", c, got)
		}
		if !tagIsRTS(tg | rtsBit) {
			t.Errorf("rts bit lost")
		}
	}
}

func TestMatchBits(t *testing.T) {
	msg := packTag(4, 0, 3, 17)
	for _, c := range []struct {
		src, tag int
		ctx      uint16
		want     bool
	}{
		{3, 17, 4, true},
		{AnySource, 17, 4, true},
		{3, AnyTag, 4, true},
		{AnySource, AnyTag, 4, true},
		{2, 17, 4, false},
		{3, 16, 4, false},
		{AnySource, AnyTag, 6, false}, // other communicator never matches
		{AnySource, AnyTag, 5, false}, // collective twin context never matches
	} {
		w, ig := matchBits(c.ctx, 0, c.src, c.tag)
		if got := tagMatches(msg, w, ig); got != c.want {
			t.Errorf("recv(src=%d tag=%d ctx=%d) matches=%v, want %v", c.src, c.tag, c.ctx, got, c.want)
		}
		if !tagMatches(msg|rtsBit, w, ig) && c.want {
			t.Errorf("recv(src=%d tag=%d) does not match the rendezvous header", c.src, c.tag)
		}
		if tagMatches(ctrlTag(msg), w, ig) {
			t.Errorf("user receive matches a control tag")
		}
	}
	// shared-endpoint slot is exact: a message for slot 2 never reaches slot 1.
	w, ig := matchBits(4, 1, AnySource, AnyTag)
	if tagMatches(packTag(4, 2, 0, 0), w, ig) {
		t.Error("slot 1 receive matched a message for slot 2")
	}
}

func TestCheckTag(t *testing.T) {
	if err := checkTag(TagUB+1, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("tag above TagUB: %v", err)
	}
	if err := checkTag(AnyTag, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("AnyTag on a send: %v", err)
	}
	if err := checkTag(AnyTag, true); err != nil {
		t.Errorf("AnyTag on a receive: %v", err)
	}
}

func TestRendezvousHeader(t *testing.T) {
	h := rdvHeader{addr: 0x7f0012345678, key: 42, size: 64 << 20, seq: 9}
	var b [rdvHeaderSize]byte
	h.put(b[:])
	if got := parseHeader(b[:]); got != h {
		t.Fatalf("header round trip: %+v != %+v", got, h)
	}
	if got := parseHeader(b[:10]); got != (rdvHeader{}) {
		t.Fatalf("short header parsed: %+v", got)
	}
}

func TestEnvConfig(t *testing.T) {
	t.Setenv(EnvEagerLimit, "4096")
	t.Setenv(EnvShared, "true")
	t.Setenv(EnvTimeout, "2s")
	c, err := envConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.eagerLimit != 4096 || !c.shared || c.timeout.Seconds() != 2 {
		t.Fatalf("config %+v", c)
	}
	t.Setenv(EnvEagerLimit, "8")
	if _, err := envConfig(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), EnvEagerLimit) || !strings.Contains(err.Error(), "32..1G") {
		t.Fatalf("eager limit below header size: %v, want ErrInvalid naming %s and 32..1G", err, EnvEagerLimit)
	}
	t.Setenv(EnvEagerLimit, "64K")
	if c, err := envConfig(); err != nil || c.eagerLimit != 64<<10 {
		t.Fatalf("%s=64K: %d, %v", EnvEagerLimit, c.eagerLimit, err)
	}
	t.Setenv(EnvEagerLimit, "")
	t.Setenv(EnvShared, "maybe")
	if _, err := envConfig(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad %s accepted: %v", EnvShared, err)
	}
	t.Setenv(EnvShared, "")
	// Settings of other packages and the tuning knobs fail Init too.
	for _, kv := range [][2]string{{"WEFT_ONESIDED_WAIT", "sometimes"}, {"WEFT_JIT", "maybe"}, {"WEFT_FASTCALL", "fast"}, {"WEFT_TUNE", "epspin=0"}, {"WEFT_TUNE", "nosuchknob=1"}} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			t.Setenv(kv[0], kv[1])
			if _, err := envConfig(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), kv[0]) {
				t.Fatalf("envConfig = %v, want ErrInvalid naming %s", err, kv[0])
			}
		})
	}
}

func TestAsBytes(t *testing.T) {
	f := []float64{1, 2, 3}
	if b := AsBytes(f); len(b) != 24 {
		t.Fatalf("len %d", len(b))
	}
	if AsBytes([]int32(nil)) != nil {
		t.Fatal("nil slice not nil bytes")
	}
}
