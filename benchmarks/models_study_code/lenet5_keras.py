"""LeNet-5 on MNIST in Keras (the study's cross-framework code-clone example)."""

import keras
import numpy as np


def build(num_classes=10):
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(6, 5, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(16, 5, activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(120, activation="relu"),
            keras.layers.Dense(84, activation="relu"),
            keras.layers.Dense(num_classes, activation="softmax"),
        ]
    )


def train(x, y, epochs=2, batch_size=64, lr=1e-3):
    model = build()
    model.compile(optimizer=keras.optimizers.Adam(lr), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x[..., None].astype(np.float32) / 255.0, y, epochs=epochs, batch_size=batch_size, verbose=0)
    return model


if __name__ == "__main__":
    data = np.load("mnist.npz")
    model = train(data["x"], data["y"])
    model.save("lenet5.keras")
