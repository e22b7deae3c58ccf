package monitor

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os"
	"syscall"
)

// Figures are what the summary report carries, read at each report.
type Figures struct {
	// Connections is the number of clients connected now, over all
	// protocols; ConnectionsTotal counts every connection since start.
	Connections, ConnectionsTotal int64
	// BytesIn and BytesOut are the bytes received from and sent to
	// clients (link in/out).
	BytesIn, BytesOut int64
	// Opens by outcome and failed opens.
	Hits, PartialHits, Misses, OpenErrors int64
	// Bytes served by where they came from; BytesFetched read from origins,
	// of which PrefetchBytes ahead of any client.
	BytesHit, BytesMissed, BytesBypassed, BytesFetched, PrefetchBytes int64
	// OpenFiles is the number of files with a client now.
	OpenFiles int64
	// Evictions and EvictedBytes count purged files.
	Evictions, EvictedBytes int64
	// Files and BytesCached are what the cache holds; SpaceTotal and
	// SpaceUsed the space it may fill and what is used of it.
	Files, BytesCached, SpaceTotal, SpaceUsed int64
	// MemoryLimit and MemoryUsed are the bytes the cache may hold in
	// flight from origins and holds now.
	MemoryLimit, MemoryUsed int64
	// Ops are the root:// requests, as the xrootd section counts them.
	Ops Ops
}

// Ops counts root:// requests since start-up by kind, as XRootD's summary
// report does in its xrootd section.
type Ops struct {
	// Open, Read (kXR_read and kXR_pgread), ReadV, Sync, Misc (every other
	// request) count requests.
	Open, Read, ReadV, Sync, Misc int64
	// Errors counts requests answered with an error, Redirects with
	// kXR_redirect, Delays with kXR_wait.
	Errors, Redirects, Delays int64
	// Logins counts kXR_login; AuthFailed and AuthOK the kXR_auth that
	// failed and succeeded; Unauthenticated the logins that needed no
	// kXR_auth.
	Logins, AuthFailed, AuthOK, Unauthenticated int64
}

// sendSummary sends one summary report.
func (m *Monitor) sendSummary() {
	var f Figures
	if m.cfg.Stats != nil {
		f = m.cfg.Stats()
	}
	m.maxConns = max(m.maxConns, f.Connections)
	m.summary.send(m.summaryXML(f))
}

// summaryXML renders a report as XrdStats does (xrd.report ... all): the
// statistics element with the sections hepcache has figures for: info,
// link, proc, xrootd (operations, errors, redirects, delays, logins),
// cache (XrdPfc's section, type "pfc") and sgen. The program is "xrootd",
// as XCache's: collectors drop reports of other programs (the OSG
// collector's SummaryCollector.py), and read every value of the sections
// they know, so each is sent; ver names the hepcache build.
func (m *Monitor) summaryXML(f Figures) []byte {
	c := &m.cfg
	now := c.now()
	var b bytes.Buffer
	fmt.Fprintf(&b, `<statistics tod="%d" ver="%s" src="%s:%d" tos="%d" pgm="xrootd" ins="%s" pid="%d" site="%s">`,
		now.Unix(), esc(m.version), esc(c.Host), c.Port, m.start.Unix(), esc(c.Name), os.Getpid(), esc(c.Site))
	fmt.Fprintf(&b, `<stats id="info"><host>%s</host><port>%d</port><name>%s</name></stats>`, esc(c.Host), c.Port, esc(c.Name))
	fmt.Fprintf(&b, `<stats id="link"><num>%d</num><maxn>%d</maxn><tot>%d</tot><in>%d</in><out>%d</out>`+
		`<ctime>0</ctime><tmo>0</tmo><stall>0</stall><sfps>0</sfps></stats>`,
		f.Connections, m.maxConns, f.ConnectionsTotal, f.BytesIn, f.BytesOut)
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		fmt.Fprintf(&b, `<stats id="proc"><usr><s>%d</s><u>%d</u></usr><sys><s>%d</s><u>%d</u></sys></stats>`,
			ru.Utime.Sec, ru.Utime.Usec, ru.Stime.Sec, ru.Stime.Usec)
	}
	opens := f.Hits + f.PartialHits + f.Misses
	o := f.Ops
	fmt.Fprintf(&b, `<stats id="xrootd"><num>%d</num><ops><open>%d</open><rf>0</rf><rd>%d</rd><pr>0</pr><rv>%d</rv><rs>0</rs>`+
		`<wv>0</wv><ws>0</ws><wr>0</wr><sync>%d</sync><getf>0</getf><putf>0</putf><misc>%d</misc></ops>`+
		`<err>%d</err><rdr>%d</rdr><dly>%d</dly><lgn><num>%d</num><af>%d</af><au>%d</au><ua>%d</ua></lgn></stats>`,
		f.ConnectionsTotal, o.Open, o.Read, o.ReadV, o.Sync, o.Misc, o.Errors, o.Redirects, o.Delays,
		o.Logins, o.AuthFailed, o.AuthOK, o.Unauthenticated)
	fmt.Fprintf(&b, `<stats id="cache" type="pfc"><prerd><in>%d</in><hits>0</hits><miss>0</miss></prerd>`+
		`<rd><in>%d</in><out>%d</out><hits>%d</hits><miss>%d</miss></rd>`+
		`<pass>%d<cnt>0</cnt></pass><wr><out>0</out><updt>0</updt></wr><saved>0</saved><purge>%d</purge>`+
		`<files><opened>%d</opened><closed>%d</closed><new>%d</new><del>%d</del><now>%d</now><full>0</full></files>`+
		`<store><size>%d</size><used>%d</used><min>0</min><max>0</max></store>`+
		`<mem><size>%d</size><used>%d</used><wq>0</wq></mem></stats>`,
		f.PrefetchBytes, f.BytesFetched-f.PrefetchBytes, f.BytesHit+f.BytesMissed, f.Hits+f.PartialHits, f.Misses,
		f.BytesBypassed, f.EvictedBytes,
		opens, max(opens-f.OpenFiles, 0), f.Misses, f.Evictions, f.Files,
		f.SpaceTotal, f.SpaceUsed, f.MemoryLimit, f.MemoryUsed)
	// sgen: the report was made without synchronizing counters (as 1),
	// in et microseconds, at toe.
	fmt.Fprintf(&b, `<stats id="sgen"><as>1</as><et>%d</et><toe>%d</toe></stats>`, c.now().Sub(now).Microseconds(), c.now().Unix())
	b.WriteString(`</statistics>`)
	return b.Bytes()
}

func esc(s string) string {
	var b bytes.Buffer
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
