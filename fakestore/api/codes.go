package api

import (
	"errors"
	"fmt"
)

// Code is a Mooncake ErrorCode (mooncake-store/include/types.h); 0 is OK, failures are negative.
// The master plane answers every processed operation with one of these in error_code.
type Code int32

// The codes the fake master returns, with the values and names of Mooncake's types.h/types.cpp.
const (
	OK                         Code = 0
	InternalError              Code = -1
	SegmentNotFound            Code = -101
	SegmentAlreadyExists       Code = -102
	ClientNotFound             Code = -103
	NoAvailableHandle          Code = -200
	InvalidParams              Code = -600
	IllegalClient              Code = -601
	InvalidWrite               Code = -700
	ReplicaIsNotReady          Code = -703
	ObjectNotFound             Code = -704
	ObjectAlreadyExists        Code = -705
	ObjectHasLease             Code = -706
	RPCFail                    Code = -900
	UnavailableInCurrentStatus Code = -1010
	UnavailableInCurrentMode   Code = -1011
)

var codeNames = map[Code]string{
	OK:                         "OK",
	InternalError:              "INTERNAL_ERROR",
	SegmentNotFound:            "SEGMENT_NOT_FOUND",
	SegmentAlreadyExists:       "SEGMENT_ALREADY_EXISTS",
	ClientNotFound:             "CLIENT_NOT_FOUND",
	NoAvailableHandle:          "NO_AVAILABLE_HANDLE",
	InvalidParams:              "INVALID_PARAMS",
	IllegalClient:              "ILLEGAL_CLIENT",
	InvalidWrite:               "INVALID_WRITE",
	ReplicaIsNotReady:          "REPLICA_IS_NOT_READY",
	ObjectNotFound:             "OBJECT_NOT_FOUND",
	ObjectAlreadyExists:        "OBJECT_ALREADY_EXISTS",
	ObjectHasLease:             "OBJECT_HAS_LEASE",
	RPCFail:                    "RPC_FAIL",
	UnavailableInCurrentStatus: "UNAVAILABLE_IN_CURRENT_STATUS",
	UnavailableInCurrentMode:   "UNAVAILABLE_IN_CURRENT_MODE",
}

// String is Mooncake's toString(ErrorCode): the enumerator's name, "UNKNOWN_ERROR" otherwise.
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "UNKNOWN_ERROR"
}

// CodeError is a master operation that was processed and failed with a Mooncake error code.
type CodeError struct {
	Op      string
	Code    Code
	Message string
}

func (e *CodeError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("master %s: %s (%d): %s", e.Op, e.Code, int32(e.Code), e.Message)
	}
	return fmt.Sprintf("master %s: %s (%d)", e.Op, e.Code, int32(e.Code))
}

// IsCode reports whether err is (or wraps) a CodeError with code c.
func IsCode(err error, c Code) bool {
	var ce *CodeError
	return errors.As(err, &ce) && ce.Code == c
}
