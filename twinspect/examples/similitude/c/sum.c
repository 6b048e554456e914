#include <stdio.h>

int sum(int a[], int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        s += a[i];
    }
    return s;
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    printf("%d\n", sum(a, 5));
    return 0;
}
