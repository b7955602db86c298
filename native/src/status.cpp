#include "canis/kinematics.h"

extern "C" const char* canis_status_message(int status) {
    switch (status) {
        case CANIS_OK: return "ok";
        case CANIS_ERROR_NULL_POINTER: return "a required array pointer is NULL";
        case CANIS_ERROR_BAD_SIZE: return "a size argument is zero, negative or inconsistent";
        case CANIS_ERROR_BAD_HIERARCHY:
            return "parents must list the root (-1) first and every other joint after its parent";
        case CANIS_ERROR_BAD_CHAIN:
            return "each chain joint must be an ancestor of the next one in the chain";
        default: return "unknown canis status";
    }
}
