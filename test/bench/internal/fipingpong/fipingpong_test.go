package fipingpong

import "testing"

func TestParse(t *testing.T) {
	out := "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" +
		"8       1k      =1k      15k         0.00s      9.63       0.83       1.20\n"
	r, err := Parse([]byte(out))
	if err != nil || r.Usec != 0.83 || r.MBps != 9.63 {
		t.Errorf("Parse = %+v, %v", r, err)
	}
	for _, bad := range []string{"", "bytes #sent\n", "8 1k =1k 15k 0.00s fast 0.83 1.20\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
