package proto

import "strconv"

// Protocol constants.
const (
	// ProtocolVersion is the version we speak and announce (5.1.0), the
	// first with kXR_pgread and kXR_pgwrite.
	ProtocolVersion = 0x00000511
	// ProtocolPgRWVersion is the first version with pgread/pgwrite.
	ProtocolPgRWVersion = 0x00000511
	// ProtocolTLSVersion is the first version that negotiates TLS.
	ProtocolTLSVersion = 0x00000500

	// RequestHeaderLen is the size of every client request header.
	RequestHeaderLen = 24
	// ResponseHeaderLen is the size of every server response header.
	ResponseHeaderLen = 8
	// ClientHandshakeLen is the size of the client's initial handshake.
	ClientHandshakeLen = 20
	// ServerHandshakeLen is the size of the server's handshake reply
	// (an 8-byte response header and an 8-byte body).
	ServerHandshakeLen = 16
	// StatusBodyLen is the size of the kXR_status body that follows the
	// response header and precedes the info (header + body = 24 bytes).
	StatusBodyLen = 16

	// PageSize is the pgread/pgwrite page (one CRC32C per page).
	PageSize = 4096
	// ReadListItemLen is the size of one readv/readahead element.
	ReadListItemLen = 16
	// MaxReadVSegs is the most elements a server accepts in one kXR_readv
	// (16384 bytes of read_list).
	MaxReadVSegs = 16384 / ReadListItemLen
	// HandshakeMagic is the fifth word of the client handshake (ROOTD_PQ).
	HandshakeMagic = 2012
	// DataServer and LoadBalancer are the server types in the handshake.
	DataServer   = 1
	LoadBalancer = 0
)

// RequestID is a client request code (kXR_open, ...).
//
// ONLY APPEND: these values are the XRootD wire format.
type RequestID uint16

// Request codes.
const (
	ReqAuth     RequestID = 3000
	ReqQuery    RequestID = 3001
	ReqChmod    RequestID = 3002
	ReqClose    RequestID = 3003
	ReqDirlist  RequestID = 3004
	ReqGPFile   RequestID = 3005
	ReqProtocol RequestID = 3006
	ReqLogin    RequestID = 3007
	ReqMkdir    RequestID = 3008
	ReqMv       RequestID = 3009
	ReqOpen     RequestID = 3010
	ReqPing     RequestID = 3011
	ReqChkPoint RequestID = 3012
	ReqRead     RequestID = 3013
	ReqRm       RequestID = 3014
	ReqRmdir    RequestID = 3015
	ReqSync     RequestID = 3016
	ReqStat     RequestID = 3017
	ReqSet      RequestID = 3018
	ReqWrite    RequestID = 3019
	ReqFattr    RequestID = 3020
	ReqPrepare  RequestID = 3021
	ReqStatx    RequestID = 3022
	ReqEndsess  RequestID = 3023
	ReqBind     RequestID = 3024
	ReqReadV    RequestID = 3025
	ReqPgWrite  RequestID = 3026
	ReqLocate   RequestID = 3027
	ReqTruncate RequestID = 3028
	ReqSigver   RequestID = 3029
	ReqPgRead   RequestID = 3030
	ReqWriteV   RequestID = 3031
)

var requestNames = [...]string{
	"kXR_auth", "kXR_query", "kXR_chmod", "kXR_close", "kXR_dirlist",
	"kXR_gpfile", "kXR_protocol", "kXR_login", "kXR_mkdir", "kXR_mv",
	"kXR_open", "kXR_ping", "kXR_chkpoint", "kXR_read", "kXR_rm",
	"kXR_rmdir", "kXR_sync", "kXR_stat", "kXR_set", "kXR_write",
	"kXR_fattr", "kXR_prepare", "kXR_statx", "kXR_endsess", "kXR_bind",
	"kXR_readv", "kXR_pgwrite", "kXR_locate", "kXR_truncate", "kXR_sigver",
	"kXR_pgread", "kXR_writev",
}

// String returns the C name of the request ("kXR_open").
func (r RequestID) String() string {
	if r >= ReqAuth && int(r-ReqAuth) < len(requestNames) {
		return requestNames[r-ReqAuth]
	}
	return "kXR_request(" + strconv.Itoa(int(r)) + ")"
}

// Status is a server response status (kXR_ok, kXR_error, ...).
//
// ONLY APPEND: these values are the XRootD wire format.
type Status uint16

// Response status codes.
const (
	StatusOK       Status = 0
	StatusOKSoFar  Status = 4000
	StatusAttn     Status = 4001
	StatusAuthMore Status = 4002
	StatusError    Status = 4003
	StatusRedirect Status = 4004
	StatusWait     Status = 4005
	StatusWaitResp Status = 4006
	StatusStatus   Status = 4007
)

var statusNames = [...]string{
	"kXR_oksofar", "kXR_attn", "kXR_authmore", "kXR_error", "kXR_redirect",
	"kXR_wait", "kXR_waitresp", "kXR_status",
}

// String returns the C name of the status ("kXR_redirect").
func (s Status) String() string {
	if s == StatusOK {
		return "kXR_ok"
	}
	if s >= StatusOKSoFar && int(s-StatusOKSoFar) < len(statusNames) {
		return statusNames[s-StatusOKSoFar]
	}
	return "kXR_status(" + strconv.Itoa(int(s)) + ")"
}

// ErrorCode is the errnum of a kXR_error response.
//
// ONLY APPEND: these values are the XRootD wire format.
type ErrorCode int32

// Error codes.
const (
	ErrArgInvalid     ErrorCode = 3000
	ErrArgMissing     ErrorCode = 3001
	ErrArgTooLong     ErrorCode = 3002
	ErrFileLocked     ErrorCode = 3003
	ErrFileNotOpen    ErrorCode = 3004
	ErrFSError        ErrorCode = 3005
	ErrInvalidRequest ErrorCode = 3006
	ErrIOError        ErrorCode = 3007
	ErrNoMemory       ErrorCode = 3008
	ErrNoSpace        ErrorCode = 3009
	ErrNotAuthorized  ErrorCode = 3010
	ErrNotFound       ErrorCode = 3011
	ErrServerError    ErrorCode = 3012
	ErrUnsupported    ErrorCode = 3013
	ErrNoServer       ErrorCode = 3014
	ErrNotFile        ErrorCode = 3015
	ErrIsDirectory    ErrorCode = 3016
	ErrCancelled      ErrorCode = 3017
	ErrItExists       ErrorCode = 3018
	ErrChkSumErr      ErrorCode = 3019
	ErrInProgress     ErrorCode = 3020
	ErrOverQuota      ErrorCode = 3021
	ErrSigVerErr      ErrorCode = 3022
	ErrDecryptErr     ErrorCode = 3023
	ErrOverloaded     ErrorCode = 3024
	ErrFSReadOnly     ErrorCode = 3025
	ErrBadPayload     ErrorCode = 3026
	ErrAttrNotFound   ErrorCode = 3027
	ErrTLSRequired    ErrorCode = 3028
	ErrNoReplicas     ErrorCode = 3029
	ErrAuthFailed     ErrorCode = 3030
	ErrImpossible     ErrorCode = 3031
	ErrConflict       ErrorCode = 3032
	ErrTooManyErrs    ErrorCode = 3033
	ErrReqTimedOut    ErrorCode = 3034
)

var errorNames = [...]string{
	"kXR_ArgInvalid", "kXR_ArgMissing", "kXR_ArgTooLong", "kXR_FileLocked",
	"kXR_FileNotOpen", "kXR_FSError", "kXR_InvalidRequest", "kXR_IOError",
	"kXR_NoMemory", "kXR_NoSpace", "kXR_NotAuthorized", "kXR_NotFound",
	"kXR_ServerError", "kXR_Unsupported", "kXR_noserver", "kXR_NotFile",
	"kXR_isDirectory", "kXR_Cancelled", "kXR_ItExists", "kXR_ChkSumErr",
	"kXR_inProgress", "kXR_overQuota", "kXR_SigVerErr", "kXR_DecryptErr",
	"kXR_Overloaded", "kXR_fsReadOnly", "kXR_BadPayload", "kXR_AttrNotFound",
	"kXR_TLSRequired", "kXR_noReplicas", "kXR_AuthFailed", "kXR_Impossible",
	"kXR_Conflict", "kXR_TooManyErrs", "kXR_ReqTimedOut",
}

// String returns the C name of the error code ("kXR_NotFound").
func (e ErrorCode) String() string {
	if e >= ErrArgInvalid && int(e-ErrArgInvalid) < len(errorNames) {
		return errorNames[e-ErrArgInvalid]
	}
	return "kXR_error(" + strconv.Itoa(int(e)) + ")"
}

// OpenMode is the permission mode of kXR_open (for creation) and kXR_mkdir.
//
// ONLY APPEND: these values are the XRootD wire format.
type OpenMode uint16

// Open modes.
const (
	ModeOtherExec  OpenMode = 0x001
	ModeOtherWrite OpenMode = 0x002
	ModeOtherRead  OpenMode = 0x004
	ModeGroupExec  OpenMode = 0x008
	ModeGroupWrite OpenMode = 0x010
	ModeGroupRead  OpenMode = 0x020
	ModeUserExec   OpenMode = 0x040
	ModeUserWrite  OpenMode = 0x080
	ModeUserRead   OpenMode = 0x100
)

// OpenOptions are the options of kXR_open; kXR_locate reuses some bits.
//
// ONLY APPEND: these values are the XRootD wire format.
type OpenOptions uint16

// Open options.
const (
	OpenCompress  OpenOptions = 0x0001
	OpenDelete    OpenOptions = 0x0002
	OpenForce     OpenOptions = 0x0004
	OpenNew       OpenOptions = 0x0008
	OpenRead      OpenOptions = 0x0010
	OpenUpdate    OpenOptions = 0x0020
	OpenAsync     OpenOptions = 0x0040
	OpenRefresh   OpenOptions = 0x0080
	OpenMkpath    OpenOptions = 0x0100
	OpenAppend    OpenOptions = 0x0200
	OpenRetStat   OpenOptions = 0x0400
	OpenReplica   OpenOptions = 0x0800
	OpenPOSC      OpenOptions = 0x1000
	OpenNoWait    OpenOptions = 0x2000
	OpenSeqIO     OpenOptions = 0x4000
	OpenWriteOnly OpenOptions = 0x8000

	// Locate-only meanings of the same bits.
	LocateUniqueHosts = OpenCompress // return unique hosts
	LocateRefresh     = OpenRefresh
	LocatePrefName    = OpenMkpath // return host names, not addresses
	Locate4Dirlist    = OpenRetStat
	LocateNoWait      = OpenNoWait
)

// StatFlags is the flags token of a stat response.
//
// ONLY APPEND: these values are the XRootD wire format.
type StatFlags int32

// Stat flags. A plain file has none of IsDir and Other.
const (
	StatFile     StatFlags = 0
	StatXset     StatFlags = 1
	StatIsDir    StatFlags = 2
	StatOther    StatFlags = 4
	StatOffline  StatFlags = 8
	StatReadable StatFlags = 16
	StatWritable StatFlags = 32
	StatPOSCPend StatFlags = 64
	StatBkpExist StatFlags = 128
)

// StatVFS is the kXR_vfs option of kXR_stat (statfs-like information).
const StatVFS uint8 = 1

// DirlistOptions are the options of kXR_dirlist.
//
// ONLY APPEND: these values are the XRootD wire format.
type DirlistOptions uint8

// Dirlist options.
const (
	DirlistOnline DirlistOptions = 1
	DirlistDStat  DirlistOptions = 2
	DirlistDCksm  DirlistOptions = 4 // implies DirlistDStat
)

// DStatLeadIn is the first entry of a kXR_dstat listing: a "." entry with a
// zero stat that tells the client the server supports dstat.
const DStatLeadIn = ".\n0 0 0 0\n"

// QueryType is the infotype of kXR_query.
//
// ONLY APPEND: these values are the XRootD wire format.
type QueryType uint16

// Query types.
const (
	QueryStats    QueryType = 1
	QueryPrep     QueryType = 2
	QueryChecksum QueryType = 3
	QueryXattr    QueryType = 4
	QuerySpace    QueryType = 5
	QueryCkscan   QueryType = 6
	QueryConfig   QueryType = 7
	QueryVisa     QueryType = 8
	QueryOpaque   QueryType = 16
	QueryOpaquf   QueryType = 32
	QueryOpaqug   QueryType = 64
)

// LoginAbility is the ability byte of kXR_login (a bit mask).
//
// ONLY APPEND: these values are the XRootD wire format.
type LoginAbility uint8

// Login abilities.
const (
	AbilityNothing   LoginAbility = 0
	AbilityFullURL   LoginAbility = 1
	AbilityMultiPr   LoginAbility = 3
	AbilityReadRdOK  LoginAbility = 4
	AbilityHasIPv64  LoginAbility = 8
	AbilityOnlyPrv4  LoginAbility = 16
	AbilityOnlyPrv6  LoginAbility = 32
	AbilityLclFile   LoginAbility = 64
	AbilityRedirFlag LoginAbility = 128
	Ability2ECRedir  uint8        = 1 // in ability2
)

// Login capver byte: the client's version in the low bits plus kXR_asyncap.
//
// ONLY APPEND: these values are the XRootD wire format.
const (
	CapVerMask  uint8 = 63
	CapAsync    uint8 = 128
	LoginVer005 uint8 = 5 // TLS-capable clients (2019)
)

// ProtocolFlags are the flags byte of kXR_protocol.
//
// ONLY APPEND: these values are the XRootD wire format.
type ProtocolFlags uint8

// Protocol request flags.
const (
	ProtoSecReqs ProtocolFlags = 0x01 // return security requirements
	ProtoAbleTLS ProtocolFlags = 0x02 // client can do TLS
	ProtoWantTLS ProtocolFlags = 0x04 // switch the connection to TLS
	ProtoBifReqs ProtocolFlags = 0x08 // return bind interface requirements
)

// Protocol request "expect" values (low 4 bits).
//
// ONLY APPEND: these values are the XRootD wire format.
const (
	ExpectMask  uint8 = 0x0f
	ExpectNone  uint8 = 0x00
	ExpectBind  uint8 = 0x01
	ExpectGPF   uint8 = 0x02
	ExpectLogin uint8 = 0x03
	ExpectTPC   uint8 = 0x04
	ExpectGPFA  uint8 = 0x08
)

// ServerFlags are the flags word of the kXR_protocol response, and also the
// negative port of some redirects.
//
// ONLY APPEND: these values are the XRootD wire format.
type ServerFlags uint32

// Server flags.
const (
	IsServer      ServerFlags = 0x00000001
	IsManager     ServerFlags = 0x00000002
	AttrMeta      ServerFlags = 0x00000100
	AttrProxy     ServerFlags = 0x00000200
	AttrSuper     ServerFlags = 0x00000400
	AttrVirtRdr   ServerFlags = 0x00000800
	RecoverWrts   ServerFlags = 0x00001000
	CollapseRedir ServerFlags = 0x00002000
	ECRedir       ServerFlags = 0x00004000
	SupPOSC       ServerFlags = 0x00100000
	SupPgRW       ServerFlags = 0x00200000
	SupGPF        ServerFlags = 0x00400000
	AnonGPF       ServerFlags = 0x00800000
	TLSData       ServerFlags = 0x01000000
	TLSGPF        ServerFlags = 0x02000000
	TLSLogin      ServerFlags = 0x04000000
	TLSSess       ServerFlags = 0x08000000
	TLSTPC        ServerFlags = 0x10000000
	TLSGPFA       ServerFlags = 0x20000000
	GotoTLS       ServerFlags = 0x40000000
	HaveTLS       ServerFlags = 0x80000000
	TLSAny        ServerFlags = 0x1f000000
)

// AttnAction is the action code of a kXR_attn response.
//
// ONLY APPEND: these values are the XRootD wire format.
type AttnAction int32

// Attention actions still in use.
const (
	AttnAsyncMsg AttnAction = 5002 // kXR_asyncms: a message for the log
	AttnAsynResp AttnAction = 5008 // kXR_asynresp: the answer to a kXR_waitresp
)

// RespType is the resptype of a kXR_status body.
//
// ONLY APPEND: these values are the XRootD wire format.
type RespType uint8

// Status response types.
const (
	FinalResult   RespType = 0
	PartialResult RespType = 1
	ProgressInfo  RespType = 2
)

// PgRead request flags (ClientPgReadReqArgs.reqflags) and path ids.
//
// ONLY APPEND: these values are the XRootD wire format.
const (
	PgRetry   uint8 = 0x01
	AnyPathID uint8 = 0xff
)
