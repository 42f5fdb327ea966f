// qconform's stand-in for NVTX's header (the NVIDIA Tools Extension, version 3), found only where the toolkit has
// no NVTX (it is searched after the toolkit's folders). Programs mark host code with its ranges (a scoped range
// class around each launcher, llm.c's NVTX_RANGE_FN). qconform never runs host code, so this header declares the
// API's types, constants and entry points and defines nothing; device code cannot call NVTX.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define NVTX_VERSION 3
#define NVTX_SUCCESS 0
#define NVTX_FAIL 1
#define NVTX_COLOR_UNKNOWN 0
#define NVTX_COLOR_ARGB 1
#define NVTX_MESSAGE_UNKNOWN 0
#define NVTX_MESSAGE_TYPE_ASCII 1
#define NVTX_MESSAGE_TYPE_UNICODE 2
#define NVTX_MESSAGE_TYPE_REGISTERED 3
#define NVTX_PAYLOAD_UNKNOWN 0
#define NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 1
#define NVTX_PAYLOAD_TYPE_INT64 2
#define NVTX_PAYLOAD_TYPE_DOUBLE 3
#define NVTX_PAYLOAD_TYPE_UNSIGNED_INT32 4
#define NVTX_PAYLOAD_TYPE_INT32 5
#define NVTX_PAYLOAD_TYPE_FLOAT 6

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t nvtxRangeId_t;
typedef struct nvtxDomainRegistration_st* nvtxDomainHandle_t;
typedef struct nvtxStringRegistration_st* nvtxStringHandle_t;

typedef union nvtxMessageValue_t {
    const char* ascii;
    const wchar_t* unicode;
    nvtxStringHandle_t registered;
} nvtxMessageValue_t;

typedef struct nvtxEventAttributes_v2 {
    uint16_t version;
    uint16_t size;
    uint32_t category;
    int32_t colorType;
    uint32_t color;
    int32_t payloadType;
    int32_t reserved0;
    union payload_t {
        uint64_t ullValue;
        int64_t llValue;
        double dValue;
        uint32_t uiValue;
        int32_t iValue;
        float fValue;
    } payload;
    int32_t messageType;
    nvtxMessageValue_t message;
} nvtxEventAttributes_v2;
typedef struct nvtxEventAttributes_v2 nvtxEventAttributes_t;

#define NVTX_EVENT_ATTRIB_STRUCT_SIZE ((uint16_t)(sizeof(nvtxEventAttributes_t)))

void nvtxInitialize(const void* reserved);
void nvtxMarkEx(const nvtxEventAttributes_t* eventAttrib);
void nvtxMarkA(const char* message);
void nvtxMarkW(const wchar_t* message);
nvtxRangeId_t nvtxRangeStartEx(const nvtxEventAttributes_t* eventAttrib);
nvtxRangeId_t nvtxRangeStartA(const char* message);
nvtxRangeId_t nvtxRangeStartW(const wchar_t* message);
void nvtxRangeEnd(nvtxRangeId_t id);
int nvtxRangePushEx(const nvtxEventAttributes_t* eventAttrib);
int nvtxRangePushA(const char* message);
int nvtxRangePushW(const wchar_t* message);
int nvtxRangePop(void);
void nvtxNameCategoryA(uint32_t category, const char* name);
void nvtxNameOsThreadA(uint32_t threadId, const char* name);
nvtxDomainHandle_t nvtxDomainCreateA(const char* name);
void nvtxDomainDestroy(nvtxDomainHandle_t domain);
void nvtxDomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* eventAttrib);
int nvtxDomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* eventAttrib);
int nvtxDomainRangePop(nvtxDomainHandle_t domain);
nvtxStringHandle_t nvtxDomainRegisterStringA(nvtxDomainHandle_t domain, const char* string);

#ifdef __cplusplus
}
#endif

// the ASCII entry points under their plain names, as NVTX spells them without UNICODE
#define nvtxMark nvtxMarkA
#define nvtxRangeStart nvtxRangeStartA
#define nvtxRangePush nvtxRangePushA
#define nvtxNameCategory nvtxNameCategoryA
#define nvtxNameOsThread nvtxNameOsThreadA
#define nvtxDomainCreate nvtxDomainCreateA
#define nvtxDomainRegisterString nvtxDomainRegisterStringA
