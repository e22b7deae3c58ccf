package policy

import "testing"

func TestDecide(t *testing.T) {
	p, err := New([]Rule{
		{Prefix: "/store/mc/pileup/", Action: PassThrough},
		{Pattern: "/store/*/secret*", Action: Deny},
		{Prefix: "/user/", Mutable: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path    string
		action  Action
		mutable bool
	}{
		{"/store/mc/pileup/a.root", PassThrough, false},
		{"/store/mc/pileup", PassThrough, false},
		{"/store/mc/pileupX/a.root", Cache, false},
		{"/store/data/secret.root", Deny, false},
		{"/store/data/x/secret.root", Cache, false},
		{"/user/alice/f", Cache, true},
		{"/other", Cache, false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			d := p.Decide(tc.path)
			if d.Action != tc.action || d.Mutable != tc.mutable {
				t.Fatalf("Decide(%q)=%+v want %v mutable=%v", tc.path, d, tc.action, tc.mutable)
			}
		})
	}
	var nilp *Policy
	if d := nilp.Decide("/x"); d.Action != Cache {
		t.Fatal("nil policy must cache")
	}
}

func TestMapLFNToPFN(t *testing.T) {
	p, err := New(nil, []MapRule{
		{Match: `^/store/data/(.*)$`, Replace: "/pnfs/site.example/cms/data/$1", Origin: "root://dcache.site.example:1094"},
		{Match: `^/store/(.*)$`, Replace: "/eos/cms/store/$1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, pp, origin string }{
		{"/store/data/Run2024/f.root", "/pnfs/site.example/cms/data/Run2024/f.root", "root://dcache.site.example:1094"},
		{"/store/mc/f.root", "/eos/cms/store/mc/f.root", ""},
		{"/other/f", "/other/f", ""},
	}
	for _, tc := range cases {
		pp, o := p.Map(tc.in)
		if pp != tc.pp || o != tc.origin {
			t.Errorf("Map(%q)=%q,%q want %q,%q", tc.in, pp, o, tc.pp, tc.origin)
		}
	}
}

func TestInvalidRules(t *testing.T) {
	if _, err := New([]Rule{{Prefix: "/a", Pattern: "/b"}}, nil); err == nil {
		t.Error("prefix and pattern both accepted")
	}
	if _, err := New([]Rule{{Prefix: "relative"}}, nil); err == nil {
		t.Error("relative prefix accepted")
	}
	if _, err := New(nil, []MapRule{{Match: "(", Replace: "/x"}}); err == nil {
		t.Error("bad regexp accepted")
	}
	if _, err := ParseAction("cachee"); err == nil {
		t.Error("bad action accepted")
	}
}
