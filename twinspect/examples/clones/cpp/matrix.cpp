// matrix.cpp - out-of-line members of linalg::Matrix and string helpers.
#include "matrix.hpp"

#include <string>
#include <vector>

namespace linalg {

Matrix Matrix::operator*(const Matrix &other) const {
    if (cols_ != other.rows_) {
        throw std::invalid_argument("shape mismatch");
    }
    Matrix result(rows_, other.cols_);
    for (std::size_t i = 0; i < rows_; ++i) {
        for (std::size_t j = 0; j < other.cols_; ++j) {
            double sum = 0.0;
            for (std::size_t k = 0; k < cols_; ++k) {
                sum += at(i, k) * other.at(k, j);
            }
            result.at(i, j) = sum;
        }
    }
    return result;
}

}  // namespace linalg

std::vector<std::string> split(const std::string &s, char sep) {
    std::vector<std::string> parts;
    std::string::size_type start = 0;
    for (;;) {
        std::string::size_type pos = s.find(sep, start);
        if (pos == std::string::npos) {
            parts.push_back(s.substr(start));
            break;
        }
        parts.push_back(s.substr(start, pos - start));
        start = pos + 1;
    }
    return parts;
}
