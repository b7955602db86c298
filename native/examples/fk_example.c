/* A C program linking the same kinematics library the Python runtime uses: proof that an
 * engine can call it through the plain C header. Prints the tip of a two-bone arm. */
#include <stdio.h>

#include "canis/kinematics.h"

int main(void) {
    const int32_t parents[3] = {-1, 0, 1};
    const float offsets[9] = {0, 0, 0, 1, 0, 0, 1, 0, 0};
    /* Root unrotated, elbow turned 90 degrees about +y. */
    const float half = 0.70710678f;
    const float local_rotations[12] = {1, 0, 0, 0, half, 0, half, 0, 1, 0, 0, 0};
    const float root_position[3] = {0, 0, 0};
    float positions[9];
    int status = canis_forward_kinematics(1, 3, parents, offsets, local_rotations, root_position,
                                          positions, NULL);
    if (status != CANIS_OK) {
        fprintf(stderr, "fk failed: %s\n", canis_status_message(status));
        return 1;
    }
    printf("tip %.4f %.4f %.4f\n", positions[6], positions[7], positions[8]);
    return 0;
}
